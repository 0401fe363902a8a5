package tasks

import (
	"bytes"
	"sort"
	"unsafe"
)

// reparse is the Set of tasks.jsonl holding data, made from prev, the
// Store's last Load, when the two differ in a few lines: the lines of the
// changed span are parsed, the records of all the others are moved to
// where the same bytes now stand. An agent's `ralph task complete`,
// `task add` or hand edit changes a handful of lines of a tree of 100,000;
// this costs a copy of the records and a walk of the tree, a fraction of
// parsing every line again. The archive must be as prev read it.
//
// nil means "parse it all": prev is not a plain snapshot of a sorted file
// in file order, or the changed lines have a problem (which the full parse
// reports with all the others), or they break the order.
func (s *Store) reparse(prev *loadCache, data, doneData []byte) *Set {
	old, ps := prev.active, prev.set
	if len(old) == 0 || len(data) == 0 || ps.changed || len(ps.warnings) > 0 || len(ps.shadowed) > 0 ||
		len(ps.archivedNow) > 0 || !bytes.Equal(prev.done, doneData) {
		return nil
	}
	// The changed span, widened to whole lines: old[a0:a1] became
	// data[a0:b1] (a1 and b1 at a newline or the end of the file).
	p := commonPrefix(old, data)
	sfx := commonSuffix(old[p:], data[p:])
	a0 := bytes.LastIndexByte(old[:p], '\n') + 1
	a1 := len(old) - sfx
	if i := bytes.IndexByte(old[a1:], '\n'); i >= 0 {
		a1 += i
	} else {
		a1 = len(old)
	}
	shift := len(data) - len(old)
	b1 := a1 + shift

	n := len(ps.active)
	// Records are in file order, so their lines' offsets increase (checked
	// as they are moved) and the span's records are found by bisection.
	off := func(i int) int {
		o, _ := offsetIn(old, ps.active[i].raw)
		return o
	}
	i0 := sort.Search(n, func(i int) bool { return off(i) >= a0 }) // first record in the span
	i1 := sort.Search(n, func(i int) bool { return off(i) >= a1 }) // first after it
	lineBase := bytes.Count(old[:a0], []byte{'\n'})
	if i0 > 0 {
		lineBase = int(ps.active[i0-1].line) - 1 + bytes.Count(old[off(i0-1):a0], []byte{'\n'})
	}
	c := &chunk{data: data[a0:b1], lineBase: lineBase, final: len(bytes.TrimSpace(data[b1:])) == 0}
	set := &Set{activeName: ps.activeName, doneName: ps.doneName, now: ps.now, done: ps.done}
	set.parseChunk(c)
	if len(c.probs) > 0 || len(c.warnings) > 0 || c.unsorted {
		return nil
	}
	lines := int32(bytes.Count(c.data, []byte{'\n'}) - bytes.Count(old[a0:a1], []byte{'\n'}))

	set.active = make([]entry, 0, i0+len(c.entries)+n-i1)
	last := -1
	move := func(i, by int, lineBy int32) bool {
		e := ps.active[i]
		o, ok := offsetIn(old, e.raw)
		if !ok || o <= last || e.flags&(fLeafMissing|fStatusMissing) != 0 {
			return false
		}
		last = o
		e.t = nil
		e.raw = data[o+by : o+by+len(e.raw)]
		if k, ok := offsetIn(ps.active[i].raw, unsafe.Slice(unsafe.StringData(e.id), len(e.id))); ok {
			e.id = bstr(e.raw[k : k+len(e.id)])
		}
		e.line += lineBy
		set.active = append(set.active, e)
		return true
	}
	for i := 0; i < i0; i++ {
		if !move(i, 0, 0) {
			return nil
		}
	}
	set.active = append(set.active, c.entries...)
	for i := i1; i < n; i++ {
		if !move(i, shift, lines) {
			return nil
		}
	}
	// The span's records must fall in order between their neighbours.
	for _, k := range []int{i0, i0 + len(c.entries)} {
		if k > 0 && k < len(set.active) && CompareIDs(set.active[k-1].id, set.active[k].id) >= 0 {
			return nil
		}
	}
	set.findShadowed()
	if probs, _ := set.check(nil); len(probs) > 0 || len(set.warnings) > 0 {
		return nil
	}
	return set
}

// offsetIn is where b starts inside buf, if b lies wholly in buf's memory.
func offsetIn(buf, b []byte) (int, bool) {
	if len(b) == 0 || len(buf) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p+uintptr(len(b)) > base+uintptr(len(buf)) {
		return 0, false
	}
	return int(p - base), true
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	// Whole blocks by bytes.Equal (vectorised), then the last one by byte.
	const block = 4096
	i := 0
	for i+block <= n && bytes.Equal(a[i:i+block], b[i:i+block]) {
		i += block
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix is the length of the longest common suffix of a and b.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	const block = 4096
	i := 0
	for i+block <= n && bytes.Equal(a[len(a)-i-block:len(a)-i], b[len(b)-i-block:len(b)-i]) {
		i += block
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}
