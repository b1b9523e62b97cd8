//go:build !race

package symheap

// raceEnabled: built with -race (msg_race.go).
const raceEnabled = false
