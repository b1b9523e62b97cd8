package cabi

import (
	"reflect"

	"github.com/symheap/symheap/internal/calls"
)

// The call words' area (internal/calls), which the C library publishes
// its collective calls in as the runtime does. Registered here, beside
// the other formats the C library reads, as package calls knows nothing
// of the C library.
func init() {
	RegisterStruct(Struct{Name: "calls_area", Type: reflect.TypeFor[calls.Area](),
		Doc: "a PE's call words (internal/calls, Area): the call it is in, its count of calls on each team"})
}
