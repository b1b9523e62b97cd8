//go:build !ucx

package main

// multiNode describes the multi-node support of this build: none.
func multiNode() string {
	return "not built in (build with -tags ucx for PEs on other nodes over UCX, started by a PMIx launcher)"
}
