package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/symheap/symheap/launch"
)

// TestHeat builds the example and runs it as shrun would, on 4 PEs and on
// 3 (strips of unequal height) in offset mode; each run must verify its
// answer and leave nothing in /dev/shm.
func TestHeat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example: not in -short")
	}
	for _, c := range []struct {
		n    int
		env  []string
		args []string
	}{
		{4, nil, nil},
		{3, []string{"SYMHEAP_OFFSET_MODE=1", "SYMHEAP_ALLOCATOR=buddy"}, []string{"-n", "61", "-steps", "300"}},
	} {
		var out bytes.Buffer
		res, err := launch.Run(context.Background(), launch.Options{
			N: c.n, Heap: "16m", Timeout: 3 * time.Minute, Tag: true, Stdout: &out, Stderr: &out,
			Env: append([]string{"SYMHEAP_SHARED_SIZE=1m"}, c.env...),
		}, ".", c.args...)
		if err != nil || res.Status != 0 {
			t.Fatalf("%d PEs: %v (status %d); output:\n%s", c.n, err, res.Status, out.String())
		}
		if !strings.Contains(out.String(), "verified against the serial computation") {
			t.Fatalf("%d PEs: no verdict in the output:\n%s", c.n, out.String())
		}
		if len(res.Removed) > 0 {
			t.Errorf("%d PEs: the job left %v in /dev/shm", c.n, res.Removed)
		}
		t.Log(strings.TrimSpace(out.String()))
	}
}
