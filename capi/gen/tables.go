package main

// The type tables of OpenSHMEM 1.5, row for row as the specification
// has them (content/*.tex of github.com/openshmem-org/specification at
// tag v1.5, unchanged at v1.6 but for the scans' table, which 1.6 adds;
// each table below names its label there): each typed family is
// generated for the types of its table, and its C11 generic name selects
// every row of it.

// typ is one row of a type table: the TYPENAME of the routine names and
// the C type.
type typ struct {
	name, c string
	signed  bool // integers: signed (waits compare as signed)
	float   bool // float, double, long double
	complex bool
	// base is the C type a typedef'd integer is on the LP64 Linux ABIs
	// symheap runs on (int64_t is long); "" for a C type of its own. A
	// _Generic selection may name a type once, so a table's typedef rows
	// are listed under their own names only where the table has no row
	// of their base type (the bitwise AMO table has int32_t and int64_t
	// but not int and long). The header asserts these at compile time.
	base string
}

// under is the C type t is: its base for a typedef, else its own.
func (t typ) under() string {
	if t.base != "" {
		return t.base
	}
	return t.c
}

var allTypes = map[string]typ{
	"float":      {name: "float", c: "float", float: true},
	"double":     {name: "double", c: "double", float: true},
	"longdouble": {name: "longdouble", c: "long double", float: true},
	"char":       {name: "char", c: "char", signed: true},
	"schar":      {name: "schar", c: "signed char", signed: true},
	"short":      {name: "short", c: "short", signed: true},
	"int":        {name: "int", c: "int", signed: true},
	"long":       {name: "long", c: "long", signed: true},
	"longlong":   {name: "longlong", c: "long long", signed: true},
	"uchar":      {name: "uchar", c: "unsigned char"},
	"ushort":     {name: "ushort", c: "unsigned short"},
	"uint":       {name: "uint", c: "unsigned int"},
	"ulong":      {name: "ulong", c: "unsigned long"},
	"ulonglong":  {name: "ulonglong", c: "unsigned long long"},
	"int8":       {name: "int8", c: "int8_t", signed: true, base: "signed char"},
	"int16":      {name: "int16", c: "int16_t", signed: true, base: "short"},
	"int32":      {name: "int32", c: "int32_t", signed: true, base: "int"},
	"int64":      {name: "int64", c: "int64_t", signed: true, base: "long"},
	"uint8":      {name: "uint8", c: "uint8_t", base: "unsigned char"},
	"uint16":     {name: "uint16", c: "uint16_t", base: "unsigned short"},
	"uint32":     {name: "uint32", c: "uint32_t", base: "unsigned int"},
	"uint64":     {name: "uint64", c: "uint64_t", base: "unsigned long"},
	"size":       {name: "size", c: "size_t", base: "unsigned long"},
	"ptrdiff":    {name: "ptrdiff", c: "ptrdiff_t", signed: true, base: "long"},
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
	// Standard RMA types (rma_intro.tex, stdrmatypes): RMA, put with
	// signal, broadcast, collect, fcollect, alltoall, alltoalls.
	rmaTypes = types("float", "double", "longdouble", "char", "schar", "short", "int", "long", "longlong",
		"uchar", "ushort", "uint", "ulong", "ulonglong", "int8", "int16", "int32", "int64",
		"uint8", "uint16", "uint32", "uint64", "size", "ptrdiff")
	// Standard AMO types (atomics_intro.tex, stdamotypes): compare_swap,
	// fetch_inc, inc, fetch_add, add; and the point-to-point
	// synchronisation routines (p2p_sync_intro.tex: wait_until_all, _any,
	// _some, their _vector forms and the test_ ones have these only).
	amoTypes = types("int", "long", "longlong", "uint", "ulong", "ulonglong", "int32", "int64",
		"uint32", "uint64", "size", "ptrdiff")
	// Extended AMO types (extamotypes): fetch, set, swap.
	extAmoTypes = types("float", "double", "int", "long", "longlong", "uint", "ulong", "ulonglong",
		"int32", "int64", "uint32", "uint64", "size", "ptrdiff")
	// Bitwise AMO types (bitamotypes): fetch_and, and, fetch_or, or,
	// fetch_xor, xor. Not int, long or long long: int32_t and int64_t are
	// int and long here, so the generic names take those through them.
	bitAmoTypes = types("uint", "ulong", "ulonglong", "int32", "int64", "uint32", "uint64")
	// Point-to-point synchronisation types (p2psynctypes, deprecated):
	// the standard AMO types and short, unsigned short, which 1.5 keeps
	// (deprecated) for wait_until and test only.
	syncTypes = types("short", "int", "long", "longlong", "ushort", "uint", "ulong", "ulonglong",
		"int32", "int64", "uint32", "uint64", "size", "ptrdiff")
	// Team-based reductions (shmem_reductions.tex, teamreducetypes), by
	// operation: AND, OR, XOR; MAX, MIN; SUM, PROD.
	bitRedTypes = types("uchar", "ushort", "uint", "ulong", "ulonglong", "int8", "int16", "int32", "int64",
		"uint8", "uint16", "uint32", "uint64", "size")
	cmpRedTypes = types("char", "schar", "short", "int", "long", "longlong", "ptrdiff", "uchar", "ushort",
		"uint", "ulong", "ulonglong", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
		"uint64", "size", "float", "double", "longdouble")
	arithRedTypes = append(append([]typ(nil), cmpRedTypes...), types("complexd", "complexf")...)
	// The scans of OpenSHMEM 1.6 (shmem_scan.tex at tag v1.6:
	// shmem_sum_inscan, shmem_sum_exscan): "the integer, real, or
	// complex types supported for the SUM operation" of teamreducetypes.
	scanTypes = arithRedTypes

	// The active-set reductions of OpenSHMEM 1.4 (deprecated), *_to_all
	// (asetreducetypes).
	oldBitTypes   = types("short", "int", "long", "longlong")
	oldCmpTypes   = types("short", "int", "long", "longlong", "float", "double", "longdouble")
	oldArithTypes = types("short", "int", "long", "longlong", "float", "double", "longdouble", "complexd", "complexf")
	// The 1.0-1.4 atomics (deprecated): shmem_TYPE_finc, inc, fadd, add,
	// cswap; swap, fetch, set; shmem_TYPE_wait (the lists in the
	// DeprecateBlocks of shmem_atomic_*.tex and shmem_wait_until.tex).
	oldAmoTypes    = types("int", "long", "longlong")
	oldExtAmoTypes = types("float", "double", "int", "long", "longlong")
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
