package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/launch"
)

// hiddenProbe is the PE side of the same-address probe of symheap info.
const hiddenProbe = "__probe-same-address"

// probeSameAddress tries the same-address mapping for real: it starts a
// job of two PEs of this executable and asks them which mode they got.
func probeSameAddress() string {
	exe, err := os.Executable()
	if err != nil {
		return "not probed: " + err.Error()
	}
	var out bytes.Buffer
	res, err := launch.Run(context.Background(), launch.Options{
		N: 2, Heap: "2m", Timeout: 20 * time.Second, Stdout: &out, Stderr: &out,
		Env: []string{"SYMHEAP_SHARED_SIZE=1m"},
	}, exe, hiddenProbe)
	if err != nil || res.Status != 0 {
		return fmt.Sprintf("probe failed (%v): %s", err, strings.TrimSpace(out.String()))
	}
	lines := strings.Fields(out.String())
	same := 0
	for _, l := range lines {
		if l == "same-address" {
			same++
		}
	}
	if same == 2 {
		return "yes: 2 probe PEs mapped the segment at one address"
	}
	return "no: the probe PEs fell back to offset translation (symheap works, pointers must be passed as SharedPtr)"
}

// runProbePE joins the probe job and reports its mode.
func runProbePE() error {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		return err
	}
	defer pe.Close()
	if pe.SameAddress() {
		fmt.Println("same-address")
	} else {
		fmt.Println("offset")
	}
	return nil
}
