package tasks

import (
	"bytes"
	"slices"
	"sort"
	"strings"
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
func (s *Store) reparse(prev *loadCache, data, doneData []byte, sh *shared) *Set {
	old, ps := prev.active, prev.set
	if len(old) == 0 || len(data) == 0 || ps.changed || len(ps.warnings) > 0 || len(ps.shadowed) > 0 ||
		len(ps.archivedNow) > 0 || !bytes.Equal(prev.done, doneData) {
		return nil
	}
	// The changed span, widened to whole lines: old[a0:a1] became
	// data[a0:b1] (a1 and b1 at a newline or the end of the file).
	var p, sfx int
	if sh != nil && sh.was == &old[0] && sh.data == &data[0] { // found while reading data
		p = min(sh.prefix, len(old), len(data))
		sfx = min(sh.suffix, len(old)-p, len(data)-p)
	} else {
		p = commonPrefix(old, data)
		sfx = commonSuffix(old[p:], data[p:])
	}
	a0 := bytes.LastIndexByte(old[:p], '\n') + 1
	a1 := len(old) - sfx
	if i := bytes.IndexByte(old[a1:], '\n'); i >= 0 {
		a1 += i
	} else {
		a1 = len(old)
	}
	shift := len(data) - len(old)
	b1 := a1 + shift

	if len(data) > 1<<32-1 {
		return nil
	}
	n := len(ps.active)
	// Records are in file order, so their offsets increase (checked as
	// they are copied) and the span's records are found by bisection.
	i0 := sort.Search(n, func(i int) bool { return int(ps.active[i].off) >= a0 }) // first record in the span
	i1 := sort.Search(n, func(i int) bool { return int(ps.active[i].off) >= a1 }) // first after it
	lineBase := bytes.Count(old[:a0], []byte{'\n'})
	if i0 > 0 {
		lineBase = int(ps.active[i0-1].line) - 1 + bytes.Count(old[ps.active[i0-1].off:a0], []byte{'\n'})
	}
	c := &chunk{data: data[a0:b1], lineBase: lineBase, final: len(bytes.TrimSpace(data[b1:])) == 0}
	set := &Set{activeName: ps.activeName, doneName: ps.doneName, now: ps.now, data: data, doneData: ps.doneData,
		names: slices.Clip(ps.names), done: ps.done}
	set.parseChunk(c)
	if len(c.probs) > 0 || len(c.warnings) > 0 || c.unsorted {
		return nil
	}
	set.addNames(c)
	lines := int32(bytes.Count(c.data, []byte{'\n'}) - bytes.Count(old[a0:a1], []byte{'\n'}))

	set.active = make([]entry, 0, i0+len(c.entries)+n-i1)
	set.active = append(set.active, ps.active[:i0]...)
	set.active = append(set.active, c.entries...)
	set.active = append(set.active, ps.active[i1:]...)
	last := -1
	for i := range set.active {
		e := &set.active[i]
		if i >= i0 && i < i0+len(c.entries) {
			continue
		}
		if e.n == 0 || int(e.off) <= last || e.flags&(fLeafMissing|fStatusMissing) != 0 {
			return nil
		}
		last = int(e.off)
		if i >= i0 {
			e.off += uint32(shift)
			if e.flags&fIDAside == 0 {
				e.idOff += uint32(shift)
			}
			e.line += lines
		}
	}
	// The span's records must fall in order between their neighbours.
	for _, k := range []int{i0, i0 + len(c.entries)} {
		if k > 0 && k < len(set.active) && CompareIDs(set.id(&set.active[k-1]), set.id(&set.active[k])) >= 0 {
			return nil
		}
	}
	// Only the trees the span touches can have changed: from the top-level
	// task at or before the record in front of it to the next top-level
	// task after it. The rest was checked when prev was made.
	j1 := i0 + len(c.entries)
	lo := max(i0-1, 0)
	for lo > 0 && strings.IndexByte(set.id(&set.active[lo]), '.') >= 0 {
		lo--
	}
	hi := j1
	for hi < len(set.active) && strings.IndexByte(set.id(&set.active[hi]), '.') >= 0 {
		hi++
	}
	set.archIdx = ps.archIdx // the same archive
	for k := i0; k < j1; k++ {
		if set.archived(set.id(&set.active[k])) != nil {
			return nil // a line of an archived task: the full parse words it
		}
	}
	if probs, _ := set.checkRange(lo, hi, nil); len(probs) > 0 {
		return nil
	}
	set.gen, set.from, set.span = nextGen(), ps.gen, [3]int{i0, i1, j1}
	set.index()
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
