package symheap

import "fmt"

// CheckHeaps runs the allocator's full invariant check over this PE's
// symmetric heap and local shared heap, and returns the first
// inconsistency it finds (metadata overwritten by a stray store past the
// end of a block, for instance). It walks every block: call it while
// debugging or at the end of a test, not on a fast path.
func (pe *PE) CheckHeaps() error {
	if err := pe.check(); err != nil {
		return err
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if pe.ext.sym.heap != nil {
		if err := pe.ext.sym.heap.Check(); err != nil {
			return fmt.Errorf("symheap: PE %d symmetric heap: %w", pe.rank, err)
		}
	}
	if pools := pe.ext.shared.pools; pe.rank < len(pools) && pools[pe.rank] != nil {
		if err := pools[pe.rank].Check(); err != nil {
			return fmt.Errorf("symheap: PE %d shared heap: %w", pe.rank, err)
		}
	}
	return nil
}
