// Package config holds the pieces of symheap's configuration that more than
// one package reads: the syntax of sizes (SHMEM_SYMMETRIC_SIZE=512m,
// shrun --heap 2g), the names of the environment variables that make up
// the job contract between the launcher and the PEs, and the resolution of
// the runtime's settings against the environment (Resolve), which Init
// uses and symheap info reports with each setting's source.
//
// The launcher (package launch, cmd/shrun) and the runtime (package symheap)
// both parse sizes with ParseSize, so a value shrun accepts is a value Init
// accepts, and the two report a bad one with the same words.
package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/symheap/symheap/internal/errs"
)

// SizeSyntax describes the sizes ParseSize accepts; it ends every error
// ParseSize returns.
const SizeSyntax = "a size is a whole number of bytes, optionally followed by one of the " +
	"suffixes k, m, g, t (any case; powers of 1024), e.g. 4096, 64k, 512M, 2g"

// ParseSize parses a size: a non-negative decimal integer of bytes,
// optionally followed by a single unit letter k, m, g or t in either case,
// which multiply by 1024, 1024², 1024³ and 1024⁴. Spaces around the value
// are ignored; nothing else is (no sign, no fraction, no "kb", no spaces
// between number and unit). Errors wrap errs.ErrBadConfig, quote the input
// and state the accepted syntax.
func ParseSize(s string) (int64, error) {
	v := strings.TrimSpace(s)
	if v == "" {
		return 0, sizeError(s, "empty")
	}
	shift := 0
	switch v[len(v)-1] {
	case 'k', 'K':
		shift = 10
	case 'm', 'M':
		shift = 20
	case 'g', 'G':
		shift = 30
	case 't', 'T':
		shift = 40
	}
	digits := v
	if shift != 0 {
		digits = v[:len(v)-1]
	}
	if digits == "" {
		return 0, sizeError(s, "no number before the unit")
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			if i == 0 && digits[i] == '-' {
				return 0, sizeError(s, "negative")
			}
			return 0, sizeError(s, fmt.Sprintf("unexpected %q", digits[i:i+1]))
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		// Only digits remain, so the one possible failure is range.
		return 0, sizeError(s, "too large")
	}
	if n > math.MaxInt64>>shift {
		return 0, sizeError(s, "too large")
	}
	return n << shift, nil
}

func sizeError(s, why string) error {
	return fmt.Errorf("%w: size %q: %s; %s", errs.ErrBadConfig, s, why, SizeSyntax)
}

// FormatSize writes n in the shortest form ParseSize reads back exactly:
// with the largest unit that divides it, else in bytes ("512m", "1536k",
// "1000"). Negative n is written in plain decimal.
func FormatSize(n int64) string {
	if n <= 0 {
		return strconv.FormatInt(n, 10)
	}
	units := [...]struct {
		shift  uint
		suffix string
	}{{40, "t"}, {30, "g"}, {20, "m"}, {10, "k"}}
	for _, u := range units {
		if n&(1<<u.shift-1) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
