//go:build !amd64 && !arm64

package shmsync

// Pause is the CPU's spin-wait hint where one is known (pause.go); here,
// without one, it does nothing.
func Pause() {}
