package config

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/errs"
)

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1", 1},
		{"4096", 4096},
		{"64k", 64 << 10},
		{"64K", 64 << 10},
		{"512m", 512 << 20},
		{"512M", 512 << 20},
		{"2g", 2 << 30},
		{"2G", 2 << 30},
		{"3t", 3 << 40},
		{"3T", 3 << 40},
		{" 8m\t", 8 << 20},
		{"007", 7},
		{"9223372036854775807", math.MaxInt64},
		{"8388607t", 8388607 << 40},
	}
	for _, c := range good {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, nil", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, why string }{
		{"", "empty"},
		{"   ", "empty"},
		{"-1", "negative"},
		{"-4k", "negative"},
		{"+4", "unexpected"},
		{"k", "no number"},
		{"4kb", "unexpected"},
		{"4 k", "unexpected"},
		{"1.5g", "unexpected"},
		{"0x10", "unexpected"},
		{"12p", "unexpected"},
		{"lots", "unexpected"},
		{"9223372036854775808", "too large"},
		{"99999999999999999999999", "too large"},
		{"8388608t", "too large"},
		{"9007199254740992k", "too large"},
	}
	for _, c := range bad {
		got, err := ParseSize(c.in)
		if err == nil {
			t.Errorf("ParseSize(%q) = %d, nil; want an error", c.in, got)
			continue
		}
		if !errors.Is(err, errs.ErrBadConfig) {
			t.Errorf("ParseSize(%q) error %v does not wrap ErrBadConfig", c.in, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, c.why) || !strings.Contains(msg, SizeSyntax) {
			t.Errorf("ParseSize(%q) error %q: want it to say %q and give the syntax", c.in, msg, c.why)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0"}, {1000, "1000"}, {1024, "1k"}, {1536 << 10, "1536k"}, {512 << 20, "512m"},
		{2 << 30, "2g"}, {5 << 40, "5t"}, {-3, "-3"}, {math.MaxInt64, "9223372036854775807"}} {
		if got := FormatSize(c.n); got != c.want {
			t.Errorf("FormatSize(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4096", "64k", "512M", "2g", "3T", "-1", "", "1.5g", "8388608t", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !errors.Is(err, errs.ErrBadConfig) {
				t.Fatalf("ParseSize(%q): error %v does not wrap ErrBadConfig", s, err)
			}
			if n != 0 {
				t.Fatalf("ParseSize(%q) = %d with an error", s, n)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d < 0", s, n)
		}
		back, err := ParseSize(FormatSize(n))
		if err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, FormatSize(n), back, err)
		}
	})
}
