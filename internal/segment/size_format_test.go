package segment

import "testing"

// TestFormatSize: the largest unit, whole when exact, else to a tenth; a
// large inexact size is never a long count of a small unit.
func TestFormatSize(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{
		{0, "0B"}, {1023, "1023B"}, {1024, "1K"}, {1536, "1.5K"},
		{32 << 20, "32M"}, {32<<20 + 1, "32.0M"},
		{23370948 << 10, "22.3G"}, {209847088 << 10, "200.1G"},
		{3 << 40, "3T"},
	} {
		if got := FormatSize(c.n); got != c.want {
			t.Errorf("FormatSize(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
