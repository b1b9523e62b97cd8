package team

import (
	"testing"

	"github.com/symheap/symheap/internal/core"
)

// TestLayoutSizes: the structs laid out in the team area have the sizes
// the layout reserves for them.
func TestLayoutSizes(t *testing.T) {
	for _, c := range []struct {
		name       string
		size, want uint64
	}{
		{"teamSlot", core.SizeOf[teamSlot](), teamSlotSize},
		{"barrierHead", core.SizeOf[barrierHead](), 64},
		{"barrierCount", core.SizeOf[barrierCount](), 64},
		{"barrierRound", core.SizeOf[barrierRound](), 128},
	} {
		if c.size != c.want {
			t.Errorf("%s is %d bytes, the layout reserves %d", c.name, c.size, c.want)
		}
	}
}
