package far

import "testing"

// TestLostNoted: the farLost value of a loss left for the node gives back
// the lost PE and its finder, and is none of the word's other values (0,
// LostDiverged, a leader's p+2).
func TestLostNoted(t *testing.T) {
	for _, c := range []struct{ p, by int }{{0, -1}, {3, -1}, {0, 0}, {3, 1}, {1<<20 - 1, 1<<20 - 2}, {5, 1<<20 - 1}} {
		v := lostNoted(c.p, c.by)
		if v >= LostDiverged || v > lostNoted(0, -1) {
			t.Errorf("lostNoted(%d, %d) = %d: not below the word's other values", c.p, c.by, v)
		}
		if p, by := notedBy(v); p != c.p || by != c.by {
			t.Errorf("notedBy(lostNoted(%d, %d)) = %d, %d", c.p, c.by, p, by)
		}
	}
}
