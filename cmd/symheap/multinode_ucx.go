//go:build ucx

package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/symheap/symheap/internal/pmix"
	"github.com/symheap/symheap/internal/ucx"
)

// ucxDetail describes UCX in this build: its version and the transports
// and devices a PE would use, and whether a PMIx launcher started this
// process.
func ucxDetail() string {
	res, err := ucx.Describe()
	if err != nil {
		return fmt.Sprintf("UCX %s, which does not start here: %v", ucx.Version(), err)
	}
	launcher := "no PMIx launcher here (jobs on one node as without it)"
	if pmix.Available() {
		launcher = "under a PMIx launcher (namespace " + os.Getenv("PMIX_NAMESPACE") + ")"
	}
	tls := os.Getenv("UCX_TLS")
	if tls == "" {
		tls = "all"
	}
	return fmt.Sprintf("UCX %s, UCX_TLS=%s, its transports %s; %s", ucx.Version(), tls, strings.Join(res, " "), launcher)
}
