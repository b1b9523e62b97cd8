package peers

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Result is one measurement of a peer harness.
type Result struct {
	Harness string  // "osh", "mpi", "memcpy", "cacheline" (or another harness's name)
	Metric  string  // e.g. "put_lat"; the name of the test that measured it
	Size    int64   // bytes (0 where a test has no size, e.g. barrier_lat)
	Value   float64 // in Unit
	Unit    string  // "us", "ns", "MB/s" (10^6 bytes per second), "msg/s"
	PEs     int     // processes that took part (from "# npes"); 0 if not said
}

func (r Result) String() string {
	return fmt.Sprintf("%s %s %d %g %s", r.Harness, r.Metric, r.Size, r.Value, r.Unit)
}

// knownHarness reports whether a line starting with name must be a
// measurement, so that a malformed one is an error rather than noise.
func knownHarness(name string) bool {
	_, ok := harnesses[name]
	return ok
}

// unitBySuffix is the unit of a metric that has no "# unit" line.
func unitBySuffix(metric string) string {
	switch {
	case strings.HasSuffix(metric, "_lat"):
		return "us"
	case strings.HasSuffix(metric, "_bw"):
		return "MB/s"
	case strings.HasSuffix(metric, "_rate"):
		return "msg/s"
	}
	return ""
}

// Parse reads a harness's output. A measurement line is four fields,
//
//	<harness> <metric> <size-bytes> <value>
//
// where size is an integer and value a number. Comment lines start with
// "#"; "# unit <metric> <unit> ..." and "# npes <n>" are understood, others
// skipped. Other lines are skipped as noise (UCX and Open MPI print notices
// to stdout), except that a line starting with a known harness name must be
// a well-formed measurement. Parse returns the results read before an error
// together with the error.
func Parse(r io.Reader) ([]Result, error) {
	var (
		out   []Result
		units = map[string]string{}
		npes  int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		if strings.HasPrefix(text, "#") {
			f = strings.Fields(strings.TrimPrefix(text, "#"))
			switch {
			case len(f) >= 3 && f[0] == "unit":
				units[f[1]] = f[2]
			case len(f) == 2 && f[0] == "npes":
				n, err := strconv.Atoi(f[1])
				if err != nil || n < 0 {
					return out, fmt.Errorf("peers: line %d: bad npes %q", line, f[1])
				}
				npes = n
			}
			continue
		}
		res, ok := parseMeasurement(f)
		if !ok {
			if knownHarness(f[0]) {
				return out, fmt.Errorf("peers: line %d: malformed measurement %q (want <harness> <metric> <size-bytes> <value>)", line, text)
			}
			continue // noise
		}
		if u, ok := units[res.Metric]; ok {
			res.Unit = u
		} else {
			res.Unit = unitBySuffix(res.Metric)
		}
		res.PEs = npes
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("peers: reading output: %w", err)
	}
	return out, nil
}

func parseMeasurement(f []string) (Result, bool) {
	if len(f) != 4 || !isName(f[0]) || !isName(f[1]) {
		return Result{}, false
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 {
		return Result{}, false
	}
	v, err := strconv.ParseFloat(f[3], 64)
	if err != nil {
		return Result{}, false
	}
	return Result{Harness: f[0], Metric: f[1], Size: size, Value: v}, true
}

// isName: letters, digits and underscores, starting with a letter.
func isName(s string) bool {
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_'):
		default:
			return false
		}
	}
	return s != ""
}

// Find returns the first result with this metric and size.
func Find(rs []Result, metric string, size int64) (Result, bool) {
	for _, r := range rs {
		if r.Metric == metric && r.Size == size {
			return r, true
		}
	}
	return Result{}, false
}
