//go:build race

package msg

// raceEnabled: built with -race, whose detector does not see the release
// order of shmsync's release stores (they are assembly).
const raceEnabled = true
