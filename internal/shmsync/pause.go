//go:build amd64 || arm64

package shmsync

// Pause executes the CPU's spin-wait hint once: PAUSE on amd64, YIELD on
// arm64 (pause_*.s). Every loop that polls a word another process writes
// should pause between polls. The hint keeps the polling core from
// flooding the line with loads while the writer owns it, and saves the
// pipeline flush a tight loop of loads takes when the line changes. On the
// 2-core development VM one line bounced between two processes took about
// 55 ns a transfer with a pause in the polling loop and about 120 ns
// without (bench/peers/bin/cacheline_pingpong and BenchmarkMsg/PingPong).
func Pause()
