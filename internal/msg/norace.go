//go:build !race

package msg

// raceEnabled: built with -race (race.go).
const raceEnabled = false
