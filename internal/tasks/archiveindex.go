package tasks

import "strings"

// archiveIndex finds archived tasks by id in a Set's done records: for
// each id its first record, and the ids that have an archived child. It
// is never changed once made, so snapshots share it across goroutines.
//
// A Set made from another by appending to the archive (an in-place
// archive, an Update) gets a layer over the other's index for the records
// it appended, instead of an index of the whole archive: at 50,000
// archived tasks, a new index per iteration was the largest cost of the
// loop. Layers merge like the digits of a binary counter (a layer absorbs
// the one below it while that one is no larger), so a lookup reads
// O(log n) maps and each record is indexed O(log n) times in all.
type archiveIndex struct {
	below    *archiveIndex // done[:from]
	from, to int           // this layer indexes done[from:to]
	ids      map[string]int32
	parents  map[string]bool
}

// len is the number of records x indexes: done[:x.len()].
func (x *archiveIndex) len() int {
	if x == nil {
		return 0
	}
	return x.to
}

// find is the index of id's first record.
func (x *archiveIndex) find(id string) (int, bool) {
	if x == nil {
		return 0, false
	}
	if i, ok := x.below.find(id); ok {
		return i, true
	}
	i, ok := x.ids[id]
	return int(i), ok
}

// hasChild reports whether an indexed record is a child of id.
func (x *archiveIndex) hasChild(id string) bool {
	for ; x != nil; x = x.below {
		if x.parents[id] {
			return true
		}
	}
	return false
}

// indexArchive is x (the index of set.done[:x.len()]) extended to all of
// set.done.
func indexArchive(set *Set, x *archiveIndex) *archiveIndex {
	if x.len() >= len(set.done) {
		return x
	}
	top := &archiveIndex{below: x, from: x.len(), to: len(set.done)}
	for top.below != nil && top.below.to-top.below.from <= top.to-top.from {
		top.from, top.below = top.below.from, top.below.below
	}
	top.ids = make(map[string]int32, top.to-top.from)
	top.parents = make(map[string]bool)
	for i := top.from; i < top.to; i++ {
		// A copy: the index outlives the bytes of the snapshot it was
		// made for, and must not keep them alive.
		id := set.id(&set.done[i])
		if _, dup := top.ids[id]; !dup {
			top.ids[strings.Clone(id)] = int32(i)
		}
		if pid := ParentID(id); !top.parents[pid] {
			top.parents[strings.Clone(pid)] = true
		}
	}
	return top
}
