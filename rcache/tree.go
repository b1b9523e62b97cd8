package rcache

// The interval tree: every entry of the cache that is valid, ordered so that
// all entries overlapping a range are found in O(log n + k).
//
// # Layout
//
// An AVL tree whose nodes are the entries themselves (no separate node
// allocation). Nodes are ordered by (start, id); id is unique, so two entries
// with the same start, even with the same range, are distinct keys. Each node
// carries:
//
//	height  1 + the larger height of its children (a nil child has height 0)
//	maxEnd  the largest end in its subtree, itself included
//
// # Invariants (checked by check)
//
//  1. In-order traversal is strictly increasing in (start, id).
//  2. Every node's height is right and its children's heights differ by at
//     most one, so the height is at most 1.44·log2(n+2).
//  3. Every node's maxEnd is max(end, left.maxEnd, right.maxEnd).
//  4. n is the number of nodes.
//
// # Queries
//
// overlapping(r) visits a subtree only if its maxEnd > r.Start (something in
// it ends after r begins) and goes right of a node only if the node starts
// before r.End (nodes to the right start no earlier). Every node visited is
// either on one of O(log n) boundary paths or overlaps r, hence
// O(log n + k) for k results. bestCover(r) is the same walk with the
// conditions of containment (start ≤ r.Start, end ≥ r.End) and keeps the
// largest entry found.
//
// # Updates
//
// insert and remove are the textbook recursive AVL operations, each node on
// the path re-computing height and maxEnd on the way up (rebalance). remove
// of a node with two children puts the smallest node of its right subtree in
// its place. rebuild makes a perfectly balanced tree from a sorted slice in
// O(n); the cache uses it when one invalidation removes a large share of the
// entries, which is cheaper than as many single removals.
//
// The tree is not safe for concurrent use: the cache holds its mutex.

// tree is the interval tree. The zero value is an empty tree.
type tree struct {
	root *Entry
	n    int
}

// less orders entries by (start, id).
func less(a, b *Entry) bool {
	return a.start < b.start || (a.start == b.start && a.id < b.id)
}

func height(e *Entry) int8 {
	if e == nil {
		return 0
	}
	return e.height
}

// update recomputes e's height and maxEnd from its children.
func update(e *Entry) {
	hl, hr := height(e.left), height(e.right)
	e.height = 1 + max(hl, hr)
	m := e.end
	if e.left != nil && e.left.maxEnd > m {
		m = e.left.maxEnd
	}
	if e.right != nil && e.right.maxEnd > m {
		m = e.right.maxEnd
	}
	e.maxEnd = m
}

func rotateRight(e *Entry) *Entry {
	l := e.left
	e.left = l.right
	l.right = e
	update(e)
	update(l)
	return l
}

func rotateLeft(e *Entry) *Entry {
	r := e.right
	e.right = r.left
	r.left = e
	update(e)
	update(r)
	return r
}

// rebalance restores the AVL condition at e, whose subtrees are balanced
// and differ in height by at most two, and returns the subtree's new root.
func rebalance(e *Entry) *Entry {
	update(e)
	switch bf := height(e.left) - height(e.right); {
	case bf > 1:
		if height(e.left.left) < height(e.left.right) {
			e.left = rotateLeft(e.left)
		}
		return rotateRight(e)
	case bf < -1:
		if height(e.right.right) < height(e.right.left) {
			e.right = rotateRight(e.right)
		}
		return rotateLeft(e)
	}
	return e
}

func (t *tree) insert(e *Entry) {
	e.left, e.right = nil, nil
	update(e)
	t.root = insertAt(t.root, e)
	t.n++
}

func insertAt(n, e *Entry) *Entry {
	if n == nil {
		return e
	}
	if less(e, n) {
		n.left = insertAt(n.left, e)
	} else {
		n.right = insertAt(n.right, e)
	}
	return rebalance(n)
}

// remove takes e, which must be in the tree, out of it.
func (t *tree) remove(e *Entry) {
	t.root = removeAt(t.root, e)
	e.left, e.right = nil, nil
	t.n--
}

func removeAt(n, e *Entry) *Entry {
	if n == nil {
		panic("rcache: tree.remove of an entry that is not in the tree")
	}
	if n == e {
		if n.left == nil {
			return n.right
		}
		if n.right == nil {
			return n.left
		}
		var succ *Entry
		right := removeMin(n.right, &succ)
		succ.left, succ.right = n.left, right
		return rebalance(succ)
	}
	if less(e, n) {
		n.left = removeAt(n.left, e)
	} else {
		n.right = removeAt(n.right, e)
	}
	return rebalance(n)
}

func removeMin(n *Entry, min **Entry) *Entry {
	if n.left == nil {
		*min = n
		return n.right
	}
	n.left = removeMin(n.left, min)
	return rebalance(n)
}

// overlapping appends to dst every entry that shares a byte with r, in
// (start, id) order.
func (t *tree) overlapping(r Range, dst []*Entry) []*Entry {
	if r.End <= r.Start {
		return dst
	}
	return overlapAt(t.root, r, dst)
}

func overlapAt(n *Entry, r Range, dst []*Entry) []*Entry {
	for n != nil && n.maxEnd > r.Start {
		dst = overlapAt(n.left, r, dst)
		if n.start >= r.End {
			break
		}
		if n.end > r.Start {
			dst = append(dst, n)
		}
		n = n.right
	}
	return dst
}

// bestCover returns the largest entry that contains all of r (ties: the
// oldest, lowest id), or nil.
func (t *tree) bestCover(r Range) *Entry {
	return coverAt(t.root, r, nil)
}

func coverAt(n *Entry, r Range, best *Entry) *Entry {
	for n != nil && n.maxEnd >= r.End {
		best = coverAt(n.left, r, best)
		if n.start > r.Start {
			break
		}
		if n.end >= r.End && better(n, best) {
			best = n
		}
		n = n.right
	}
	return best
}

// better reports whether e is preferred to best as the entry returned for a
// lookup: larger, or as large and older.
func better(e, best *Entry) bool {
	if best == nil {
		return true
	}
	le, lb := e.end-e.start, best.end-best.start
	return le > lb || (le == lb && e.id < best.id)
}

// inorder appends every entry in order to dst.
func (t *tree) inorder(dst []*Entry) []*Entry {
	return inorderAt(t.root, dst)
}

func inorderAt(n *Entry, dst []*Entry) []*Entry {
	for n != nil {
		dst = inorderAt(n.left, dst)
		dst = append(dst, n)
		n = n.right
	}
	return dst
}

// rebuild replaces the tree by a balanced one holding exactly the entries
// of sorted, which must be in (start, id) order.
func (t *tree) rebuild(sorted []*Entry) {
	t.root = build(sorted)
	t.n = len(sorted)
}

func build(s []*Entry) *Entry {
	if len(s) == 0 {
		return nil
	}
	mid := len(s) / 2
	e := s[mid]
	e.left = build(s[:mid])
	e.right = build(s[mid+1:])
	update(e)
	return e
}

// check verifies the invariants listed in the file comment.
func (t *tree) check() error {
	var prev *Entry
	count := 0
	var walk func(n *Entry) error
	walk = func(n *Entry) error {
		if n == nil {
			return nil
		}
		if err := walk(n.left); err != nil {
			return err
		}
		if prev != nil && !less(prev, n) {
			return errorf("tree order: %v (id %d) before %v (id %d)", prev.Range(), prev.id, n.Range(), n.id)
		}
		prev = n
		count++
		if err := walk(n.right); err != nil {
			return err
		}
		hl, hr := height(n.left), height(n.right)
		if n.height != 1+max(hl, hr) {
			return errorf("tree height of %v is %d, children %d and %d", n.Range(), n.height, hl, hr)
		}
		if hl-hr > 1 || hr-hl > 1 {
			return errorf("tree unbalanced at %v: children heights %d and %d", n.Range(), hl, hr)
		}
		m := n.end
		if n.left != nil {
			m = max(m, n.left.maxEnd)
		}
		if n.right != nil {
			m = max(m, n.right.maxEnd)
		}
		if n.maxEnd != m {
			return errorf("tree maxEnd of %v is %#x, want %#x", n.Range(), n.maxEnd, m)
		}
		return nil
	}
	if err := walk(t.root); err != nil {
		return err
	}
	if count != t.n {
		return errorf("tree holds %d entries, counts %d", count, t.n)
	}
	return nil
}
