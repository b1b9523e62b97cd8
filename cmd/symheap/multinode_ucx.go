//go:build ucx

package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/symheap/symheap/internal/pmix"
	"github.com/symheap/symheap/internal/ucx"
)

// multiNode describes the multi-node support of this build: UCX's
// version and the transports and devices a PE would use, and whether a
// PMIx launcher started this process.
func multiNode() string {
	res, err := ucx.Describe()
	if err != nil {
		return fmt.Sprintf("built in (UCX %s), but UCX does not start here: %v", ucx.Version(), err)
	}
	launcher := "no PMIx launcher here (jobs on one node as without it)"
	if pmix.Available() {
		launcher = "under a PMIx launcher (namespace " + os.Getenv("PMIX_NAMESPACE") + ")"
	}
	tls := os.Getenv("UCX_TLS")
	if tls == "" {
		tls = "all"
	}
	return fmt.Sprintf("built in (ucx tag): UCX %s, UCX_TLS=%s, transports %s; %s", ucx.Version(), tls, strings.Join(res, " "), launcher)
}
