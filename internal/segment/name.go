package segment

import (
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/symheap/symheap/internal/unix"
)

// Prefix starts the name of every symheap segment in /dev/shm.
const Prefix = "symheap-"

// Name returns the /dev/shm file name of job's segment for user uid:
// "symheap-<uid>-<job>". Characters other than letters, digits, '.', '_'
// and '-' are replaced, and a hash of the original job id is appended when
// anything was replaced, so distinct ids stay distinct.
func Name(uid int, job string) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, job)
	if clean != job || len(clean) > 100 {
		h := fnv.New64a()
		h.Write([]byte(job))
		if len(clean) > 100 {
			clean = clean[:100]
		}
		clean = fmt.Sprintf("%s_%016x", clean, h.Sum64())
	}
	return Prefix + strconv.Itoa(uid) + "-" + clean
}

// Path returns the full path of job's segment for user uid.
func Path(uid int, job string) string { return filepath.Join(unix.ShmDir, Name(uid, job)) }

// ParseName splits a segment file name into uid and (cleaned) job id.
func ParseName(name string) (uid int, job string, ok bool) {
	rest, found := strings.CutPrefix(name, Prefix)
	if !found {
		return 0, "", false
	}
	u, j, found := strings.Cut(rest, "-")
	if !found {
		return 0, "", false
	}
	uid, err := strconv.Atoi(u)
	if err != nil {
		return 0, "", false
	}
	return uid, j, true
}
