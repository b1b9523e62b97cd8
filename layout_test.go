package symheap

import (
	"testing"

	"github.com/symheap/symheap/internal/core"
)

// TestLayoutSizes: the structs laid out in shared memory have the sizes
// the layout reserves for them (once compile-time checks in the files
// that imported unsafe).
func TestLayoutSizes(t *testing.T) {
	if s := core.SizeOf[control](); s > core.ControlSize {
		t.Errorf("control is %d bytes, more than the %d reserved", s, core.ControlSize)
	}
	for _, c := range []struct {
		name       string
		size, want uint64
	}{
		{"teamSlot", core.SizeOf[teamSlot](), teamSlotSize},
		{"teamCounter", core.SizeOf[teamCounter](), teamCounterSize},
	} {
		if c.size != c.want {
			t.Errorf("%s is %d bytes, the layout reserves %d", c.name, c.size, c.want)
		}
	}
}
