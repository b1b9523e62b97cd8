//go:build !race

package petest

// Race reports whether the test binary was built with -race (race.go).
const Race = false
