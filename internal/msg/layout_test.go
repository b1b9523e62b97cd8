package msg

import (
	"testing"

	"github.com/symheap/symheap/internal/core"
)

// TestLayoutSizes: the structs laid out in the message area have the
// sizes the layout reserves for them (also checked at compile time in
// view_unsafe.go).
func TestLayoutSizes(t *testing.T) {
	for _, c := range []struct {
		name       string
		size, want uint64
	}{
		{"splitSlot", core.SizeOf[splitSlot](), lineSize},
		{"bell", core.SizeOf[bell](), lineSize},
	} {
		if c.size != c.want {
			t.Errorf("%s is %d bytes, the layout reserves %d", c.name, c.size, c.want)
		}
	}
}
