//go:build amd64 || arm64

package shmsync

// Pause executes the CPU's spin-wait hint once: PAUSE on amd64, YIELD on
// arm64 (pause_*.s). Every loop that polls a word another process writes
// should pause between polls. The hint keeps the polling core from
// flooding the line with loads while the writer owns it, and saves the
// pipeline flush a tight loop of loads takes when the line changes: a
// line bouncing between two processes moved much faster with a pause in
// the polling loop (measured: docs/bench/design-measurements.md,
// «internal/shmsync/pause.go»).
func Pause()
