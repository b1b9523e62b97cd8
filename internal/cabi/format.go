package cabi

// Formats shared with the C library.
//
// Every record that the runtime and the C library both read or write in
// shared memory has one definition: its Go type. The package that owns
// the type registers it here from an init function (RegisterStruct), with
// the constants that go with it (RegisterConst). capi/gen lays each one
// out as a C struct with the Go type's offsets and sizes, asserted with
// _Static_assert, in capi/shmemi_formats.h; make build fails when that
// file is not what the types give now, and the C library refuses to start
// (shmem_init) when the header it was compiled with does not match the
// runtime it is linked with (Sum).
//
// The walk (CStructs) accepts only what may live in shared memory: fixed
// width integers and floats, the sync/atomic integers, arrays and
// structs of them. A pointer, slice, string, map, interface or an int of
// the platform's width is an error: shared memory holds no Go pointers.

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// Struct is one registered format: a Go struct type, or its tail.
type Struct struct {
	// Name is the C struct's name after "shmemi_" (snake case); "" takes
	// the Go type's name.
	Name string
	Type reflect.Type
	// From, when set, names the field where the format begins: the C
	// struct is the Go type from that field to its end, at offsets
	// counted from that field.
	From string
	Doc  string // what the record is and where its protocol is written
}

// Const is a constant the C library uses with a format, as a #define
// named SHMEMI_ + Name.
type Const struct {
	Name  string
	Value uint64
	Doc   string
}

var registry struct {
	sync.Mutex
	structs []Struct
	consts  []Const
}

// RegisterStruct registers a format. It panics on a duplicate name: two
// owners would define one C struct.
func RegisterStruct(s Struct) {
	registry.Lock()
	defer registry.Unlock()
	if s.Name == "" {
		s.Name = snake(s.Type.Name())
	}
	for _, o := range registry.structs {
		if o.Name == s.Name {
			panic(fmt.Sprintf("cabi: format %q registered twice", s.Name))
		}
	}
	registry.structs = append(registry.structs, s)
}

// RegisterConst registers a constant; it panics on a duplicate name.
func RegisterConst(name string, v uint64, doc string) {
	registry.Lock()
	defer registry.Unlock()
	for _, o := range registry.consts {
		if o.Name == name {
			panic(fmt.Sprintf("cabi: constant %q registered twice", name))
		}
	}
	registry.consts = append(registry.consts, Const{name, v, doc})
}

// Structs returns the registered formats, by name.
func Structs() []Struct {
	registry.Lock()
	defer registry.Unlock()
	s := slices.Clone(registry.structs)
	slices.SortFunc(s, func(a, b Struct) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// Consts returns the registered constants, by name.
func Consts() []Const {
	registry.Lock()
	defer registry.Unlock()
	c := slices.Clone(registry.consts)
	slices.SortFunc(c, func(a, b Const) int { return strings.Compare(a.Name, b.Name) })
	return c
}

// CStruct is a struct as C lays it out: every field at the Go type's
// offset, the gaps as padding.
type CStruct struct {
	Name   string // after "shmemi_"
	GoType string // package.Type, for the reader of the header
	Doc    string // the registration's, for a registered struct
	Size   uint64
	Fields []Field
}

// Field is one member of a CStruct.
type Field struct {
	Name string // C member name; "" for padding (Go's _ fields and alignment gaps)
	Off  uint64
	Size uint64 // bytes in all (every element of an array)
	Elem string // C type of one element: uint64_t, unsigned char, struct shmemi_x, ...
	Dims []int  // array dimensions, outermost first
}

// CStructs lays out structs and every struct they hold, each once, those
// held before those that hold them. A type registered whole keeps its
// registered name wherever it is held.
func CStructs(structs []Struct) ([]*CStruct, error) {
	w := walker{seen: map[reflect.Type]*CStruct{}, names: map[string]reflect.Type{}, given: map[reflect.Type]string{}}
	for _, s := range structs {
		if s.Type == nil || s.Type.Kind() != reflect.Struct {
			return nil, fmt.Errorf("cabi: format %q: %v is not a struct type", s.Name, s.Type)
		}
		if s.From == "" {
			w.given[s.Type] = s.Name
		}
	}
	for _, s := range structs {
		t := s.Type
		if s.From == "" {
			l, err := w.named(t)
			if err != nil {
				return nil, err
			}
			l.Doc = s.Doc
			continue
		}
		f, ok := t.FieldByName(s.From)
		if !ok || len(f.Index) != 1 {
			return nil, fmt.Errorf("cabi: format %q: %v has no field %s", s.Name, t, s.From)
		}
		l, err := w.layout(t, s.Name, f.Index[0], uint64(f.Offset))
		if err != nil {
			return nil, err
		}
		l.Doc = s.Doc
		w.order = append(w.order, l)
	}
	return w.order, nil
}

type walker struct {
	seen  map[reflect.Type]*CStruct // laid out already
	names map[string]reflect.Type   // C names taken
	given map[reflect.Type]string   // registered names
	order []*CStruct
}

// named lays out struct type t whole, once.
func (w *walker) named(t reflect.Type) (*CStruct, error) {
	if l, ok := w.seen[t]; ok {
		return l, nil
	}
	name, ok := w.given[t]
	if !ok {
		name = snake(t.Name())
	}
	l, err := w.layout(t, name, 0, 0)
	if err != nil {
		return nil, err
	}
	w.seen[t] = l
	w.order = append(w.order, l)
	return l, nil
}

// layout lays out t's fields from index first on, at offsets less base.
func (w *walker) layout(t reflect.Type, name string, first int, base uint64) (*CStruct, error) {
	if o, ok := w.names[name]; ok && o != t {
		return nil, fmt.Errorf("cabi: %v and %v would both be struct shmemi_%s", o, t, name)
	}
	w.names[name] = t
	l := &CStruct{Name: name, GoType: t.String(), Size: uint64(t.Size()) - base}
	if first > 0 {
		l.GoType += " from " + t.Field(first).Name
	}
	end := uint64(0)
	for i := first; i < t.NumField(); i++ {
		sf := t.Field(i)
		off := uint64(sf.Offset) - base
		size := uint64(sf.Type.Size())
		if size == 0 {
			continue
		}
		if off > end {
			l.Fields = append(l.Fields, Field{Off: end, Size: off - end, Elem: "unsigned char", Dims: []int{int(off - end)}})
		}
		f := Field{Name: cName(sf.Name), Off: off, Size: size}
		if sf.Name == "_" {
			f = Field{Off: off, Size: size, Elem: "unsigned char", Dims: []int{int(size)}}
		} else {
			if sf.Anonymous {
				f.Name = cName(snake(sf.Type.Name()))
			}
			et := sf.Type
			for et.Kind() == reflect.Array {
				f.Dims = append(f.Dims, et.Len())
				et = et.Elem()
			}
			elem, err := w.elem(et)
			if err != nil {
				return nil, fmt.Errorf("%v.%s: %w", t, sf.Name, err)
			}
			f.Elem = elem
		}
		l.Fields = append(l.Fields, f)
		end = off + f.Size
	}
	if l.Size > end {
		l.Fields = append(l.Fields, Field{Off: end, Size: l.Size - end, Elem: "unsigned char", Dims: []int{int(l.Size - end)}})
	}
	return l, nil
}

// atomics are the sync/atomic types a format may hold, as C integers.
var atomics = map[string]string{"Uint64": "uint64_t", "Int64": "int64_t", "Uint32": "uint32_t", "Int32": "int32_t", "Bool": "uint32_t"}

// scalars are the Go kinds a format may hold, as C types.
var scalars = map[reflect.Kind]string{
	reflect.Uint8: "unsigned char", reflect.Int8: "int8_t", reflect.Uint16: "uint16_t", reflect.Int16: "int16_t",
	reflect.Uint32: "uint32_t", reflect.Int32: "int32_t", reflect.Uint64: "uint64_t", reflect.Int64: "int64_t",
	reflect.Float32: "float", reflect.Float64: "double",
}

// elem returns the C type of a field's element type.
func (w *walker) elem(t reflect.Type) (string, error) {
	if t.PkgPath() == "sync/atomic" {
		if c, ok := atomics[t.Name()]; ok {
			return c, nil
		}
		return "", fmt.Errorf("%v cannot be shared with C", t)
	}
	if c, ok := scalars[t.Kind()]; ok {
		return c, nil
	}
	if t.Kind() != reflect.Struct || t.Name() == "" {
		return "", fmt.Errorf("%v (%v) cannot be shared with C: fixed-width integers, floats, sync/atomic integers, arrays and named structs only", t, t.Kind())
	}
	l, err := w.named(t)
	if err != nil {
		return "", err
	}
	return "struct shmemi_" + l.Name, nil
}

// snake turns a Go name into a C one: allocRec -> alloc_rec, CBOff -> cb_off.
func snake(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// cKeywords are the member names C reserves.
var cKeywords = map[string]bool{
	"auto": true, "break": true, "case": true, "char": true, "const": true, "continue": true, "default": true,
	"do": true, "double": true, "else": true, "enum": true, "extern": true, "float": true, "for": true,
	"goto": true, "if": true, "inline": true, "int": true, "long": true, "register": true, "restrict": true,
	"return": true, "short": true, "signed": true, "sizeof": true, "static": true, "struct": true,
	"switch": true, "typedef": true, "union": true, "unsigned": true, "void": true, "volatile": true, "while": true,
}

func cName(goName string) string {
	s := snake(goName)
	if cKeywords[s] {
		s += "_"
	}
	return s
}

// Sum is a digest of every registered format's layout and constant. The
// generated header records it (SHMEMI_FORMATS_SUM); the C library
// compares the two at shmem_init.
func Sum() (uint64, error) {
	h := fnv.New64a()
	put := func(v uint64) { h.Write(binary.LittleEndian.AppendUint64(nil, v)) }
	str := func(s string) { put(uint64(len(s))); h.Write([]byte(s)) }
	ls, err := CStructs(Structs())
	if err != nil {
		return 0, err
	}
	for _, l := range ls {
		str(l.Name)
		put(l.Size)
		for _, f := range l.Fields {
			str(f.Name)
			str(f.Elem)
			put(f.Off)
			put(f.Size)
			put(uint64(len(f.Dims)))
			for _, d := range f.Dims {
				put(uint64(d))
			}
		}
	}
	for _, c := range Consts() {
		str(c.Name)
		put(c.Value)
	}
	return h.Sum64(), nil
}
