//go:build !linecount

package team

// lineCounter is the line-count model's per-team counts; without the
// linecount build tag it counts nothing and costs nothing (linecount_on.go
// has the model).
type lineCounter struct{}

func (*lineCounter) begin()          {}
func (*lineCounter) wrote(*postLine) {}
func (*lineCounter) read(*postLine)  {}
func (*lineCounter) end()            {}

// collCounter is the model's counts of the collectives (linecount_on.go).
type collCounter struct{}

func (*collCounter) begin()        {}
func (*collCounter) wrote(any)     {}
func (*collCounter) read(any)      {}
func (*collCounter) end()          {}
func (*collCounter) copied(uint64) {}
