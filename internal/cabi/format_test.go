//lint:file-ignore U1000 the types' fields are read through reflection (CStructs), as the formats' are

package cabi

import (
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

type inner struct {
	a atomic.Uint32
	b uint16
}

type outer struct {
	x     atomic.Uint64
	small uint8
	// 7 bytes of Go's alignment padding: a pad member in C
	in     [2]inner
	_      [4]byte
	inline [2][3]byte
	tail   int64
}

func field(t *testing.T, l *CStruct, name string) Field {
	t.Helper()
	for _, f := range l.Fields {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("struct shmemi_%s has no member %s: %+v", l.Name, name, l.Fields)
	return Field{}
}

// TestCStructs: every member at the Go field's offset, the gaps and _
// fields as padding that covers the whole size, nested structs laid out
// once and before their holder, C keywords renamed.
func TestCStructs(t *testing.T) {
	ls, err := CStructs([]Struct{{Name: "outer", Type: reflect.TypeFor[outer]()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].Name != "inner" || ls[1].Name != "outer" {
		t.Fatalf("got %d structs, want inner then outer", len(ls))
	}
	o := reflect.TypeFor[outer]()
	l := ls[1]
	for _, c := range []struct {
		c, goName, elem string
		dims            []int
	}{
		{"x", "x", "uint64_t", nil},
		{"small", "small", "unsigned char", nil},
		{"in", "in", "struct shmemi_inner", []int{2}},
		{"inline_", "inline", "unsigned char", []int{2, 3}},
		{"tail", "tail", "int64_t", nil},
	} {
		f := field(t, l, c.c)
		sf, _ := o.FieldByName(c.goName)
		if f.Off != uint64(sf.Offset) || f.Size != uint64(sf.Type.Size()) || f.Elem != c.elem || !reflect.DeepEqual(f.Dims, c.dims) {
			t.Errorf("%s: %+v, want offset %d, size %d, %s%v", c.c, f, sf.Offset, sf.Type.Size(), c.elem, c.dims)
		}
	}
	var end uint64
	for _, f := range l.Fields {
		if f.Off != end {
			t.Errorf("member %q at %d, the one before ends at %d", f.Name, f.Off, end)
		}
		end = f.Off + f.Size
	}
	if end != uint64(o.Size()) || l.Size != end {
		t.Errorf("members end at %d, size %d; the Go type has %d bytes", end, l.Size, o.Size())
	}
}

type slot struct {
	head uint64
	post [3]inner
	done inner
}

// TestCStructsFrom: a tail of a type, at offsets from its first field.
func TestCStructsFrom(t *testing.T) {
	ls, err := CStructs([]Struct{{Name: "block", Type: reflect.TypeFor[slot](), From: "post"}})
	if err != nil {
		t.Fatal(err)
	}
	l := ls[len(ls)-1]
	base := uint64(8)
	if f := field(t, l, "post"); f.Off != 0 {
		t.Errorf("post at %d, want 0", f.Off)
	}
	sf, _ := reflect.TypeFor[slot]().FieldByName("done")
	if f := field(t, l, "done"); f.Off != uint64(sf.Offset)-base {
		t.Errorf("done at %d, want %d", f.Off, uint64(sf.Offset)-base)
	}
	if l.Size != uint64(reflect.TypeFor[slot]().Size())-base {
		t.Errorf("size %d", l.Size)
	}
}

type withPointer struct {
	n uint64
	p *uint64
}

type withInt struct{ n int }

type withString struct{ s [2]string }

// TestCStructsRefuse: nothing that Go's collector would have to see, nor
// an integer whose width depends on the platform.
func TestCStructsRefuse(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[withPointer](), reflect.TypeFor[withInt](), reflect.TypeFor[withString](), reflect.TypeFor[uint64]()} {
		if _, err := CStructs([]Struct{{Name: "x", Type: typ}}); err == nil {
			t.Errorf("%v: laid out, want an error", typ)
		}
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"allocRec": "alloc_rec", "CBOff": "cb_off", "sig": "sig", "exitCode": "exit_code", "Area": "area", "teamSlot": "team_slot", "x2Y": "x2_y"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRegistered: every registered format lays out (the root registers
// its own from its package, not imported here) and the sum is stable.
func TestRegistered(t *testing.T) {
	a, err := Sum()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Sum()
	if a != b {
		t.Errorf("Sum changed between calls: %#x, %#x", a, b)
	}
	var names []string
	for _, s := range Structs() {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "calls_area") {
		t.Errorf("registered %v, want calls_area among them", names)
	}
}
