//go:build !ucx

package main

// ucxDetail says what this build lacks of UCX.
func ucxDetail() string {
	return "UCX not built in (build with -tags ucx for UCX and a PMIx launcher)"
}
