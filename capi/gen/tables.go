package main

// The type tables of OpenSHMEM 1.5 (section 9, Tables 5 to 12 of the
// specification): each typed family is generated for the types of its
// table.

// typ is one row of a type table: the TYPENAME of the routine names and
// the C type.
type typ struct {
	name, c string
	signed  bool // integers: signed (waits compare as signed)
	float   bool // float, double, long double
	complex bool
	generic bool // a base C type, listed in the _Generic selections (the
	// sized and typedef'd integers are the same types as some base type)
}

var allTypes = map[string]typ{
	"float":      {name: "float", c: "float", float: true, generic: true},
	"double":     {name: "double", c: "double", float: true, generic: true},
	"longdouble": {name: "longdouble", c: "long double", float: true, generic: true},
	"char":       {name: "char", c: "char", signed: true, generic: true},
	"schar":      {name: "schar", c: "signed char", signed: true, generic: true},
	"short":      {name: "short", c: "short", signed: true, generic: true},
	"int":        {name: "int", c: "int", signed: true, generic: true},
	"long":       {name: "long", c: "long", signed: true, generic: true},
	"longlong":   {name: "longlong", c: "long long", signed: true, generic: true},
	"uchar":      {name: "uchar", c: "unsigned char", generic: true},
	"ushort":     {name: "ushort", c: "unsigned short", generic: true},
	"uint":       {name: "uint", c: "unsigned int", generic: true},
	"ulong":      {name: "ulong", c: "unsigned long", generic: true},
	"ulonglong":  {name: "ulonglong", c: "unsigned long long", generic: true},
	"int8":       {name: "int8", c: "int8_t", signed: true},
	"int16":      {name: "int16", c: "int16_t", signed: true},
	"int32":      {name: "int32", c: "int32_t", signed: true},
	"int64":      {name: "int64", c: "int64_t", signed: true},
	"uint8":      {name: "uint8", c: "uint8_t"},
	"uint16":     {name: "uint16", c: "uint16_t"},
	"uint32":     {name: "uint32", c: "uint32_t"},
	"uint64":     {name: "uint64", c: "uint64_t"},
	"size":       {name: "size", c: "size_t"},
	"ptrdiff":    {name: "ptrdiff", c: "ptrdiff_t", signed: true},
	"complexf":   {name: "complexf", c: "float _Complex", complex: true},
	"complexd":   {name: "complexd", c: "double _Complex", complex: true},
}

func types(names ...string) []typ {
	var out []typ
	for _, n := range names {
		t, ok := allTypes[n]
		if !ok {
			panic("unknown type " + n)
		}
		out = append(out, t)
	}
	return out
}

var (
	// Table 5: standard RMA types (RMA, collectives).
	rmaTypes = types("float", "double", "longdouble", "char", "schar", "short", "int", "long", "longlong",
		"uchar", "ushort", "uint", "ulong", "ulonglong", "int8", "int16", "int32", "int64",
		"uint8", "uint16", "uint32", "uint64", "size", "ptrdiff")
	// Table 6: standard AMO types.
	amoTypes = types("int", "long", "longlong", "uint", "ulong", "ulonglong", "int32", "int64",
		"uint32", "uint64", "size", "ptrdiff")
	// Table 7: extended AMO types (fetch, set, swap).
	extAmoTypes = types("float", "double", "int", "long", "longlong", "uint", "ulong", "ulonglong",
		"int32", "int64", "uint32", "uint64", "size", "ptrdiff")
	// Table 8: bitwise AMO types.
	bitAmoTypes = types("uint", "ulong", "ulonglong", "int32", "int64", "uint32", "uint64")
	// Table 9: point-to-point synchronisation types.
	syncTypes = types("short", "int", "long", "longlong", "ushort", "uint", "ulong", "ulonglong",
		"int32", "int64", "uint32", "uint64", "size", "ptrdiff")
	// Table 10: reduction types, by operation.
	bitRedTypes = types("uchar", "ushort", "uint", "ulong", "ulonglong", "int8", "int16", "int32", "int64",
		"uint8", "uint16", "uint32", "uint64", "size")
	cmpRedTypes = types("char", "schar", "short", "int", "long", "longlong", "ptrdiff", "uchar", "ushort",
		"uint", "ulong", "ulonglong", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
		"uint64", "size", "float", "double", "longdouble")
	arithRedTypes = append(append([]typ(nil), cmpRedTypes...), types("complexf", "complexd")...)

	// The active-set reductions of OpenSHMEM 1.4 (deprecated): *_to_all.
	oldBitTypes   = types("short", "int", "long", "longlong")
	oldCmpTypes   = types("short", "int", "long", "longlong", "float", "double", "longdouble")
	oldArithTypes = types("short", "int", "long", "longlong", "float", "double", "longdouble", "complexf", "complexd")
	// The 1.0-1.4 atomics (deprecated): shmem_TYPE_finc and so on.
	oldAmoTypes    = types("int", "long", "longlong")
	oldExtAmoTypes = types("int", "long", "longlong", "float", "double")
	oldSyncTypes   = types("short", "int", "long", "longlong")
)

// Sizes of the sized RMA routines (shmem_put8 ... shmem_put128).
var rmaSizes = []int{8, 16, 32, 64, 128}

// reduction is one operation of the reductions.
type reduction struct {
	op    string
	types []typ
	old   []typ  // its *_to_all types
	expr  string // the combination of a and b
}

var reductions = []reduction{
	{"and", bitRedTypes, oldBitTypes, "a & b"},
	{"or", bitRedTypes, oldBitTypes, "a | b"},
	{"xor", bitRedTypes, oldBitTypes, "a ^ b"},
	{"max", cmpRedTypes, oldCmpTypes, "b > a ? b : a"},
	{"min", cmpRedTypes, oldCmpTypes, "b < a ? b : a"},
	{"sum", arithRedTypes, oldArithTypes, "a + b"},
	{"prod", arithRedTypes, oldArithTypes, "a * b"},
}
