//go:build race

package petest

// Race reports whether the test binary was built with -race: tests that
// move much data may move less then (the detector slows copies down
// many times), leaving the full sizes to the build without it.
const Race = true
