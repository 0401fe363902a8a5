package tasks

import (
	"bufio"
	"bytes"
	"slices"
)

// Next returns the next pending leaf without claiming it (nil if there is
// none), like Load followed by Set.Next but fast: it streams tasks.jsonl
// without building the model. Update keeps the file sorted by id and marks
// it so; for such a file Next stops at the first pending leaf (lines after
// it are not read, so a problem further down is only reported by Load or
// Update). Otherwise it reads on to check that the rest is in order.
// Anything unusual (a file out of order after a hand edit, a bad line, the
// task also being in the archive) falls back to a full Load.
func (s *Store) Next() (*Task, error) {
	t, ok, err := s.scanNext()
	if err != nil || ok {
		return t, err
	}
	set, err := s.Load()
	if err != nil {
		return nil, err
	}
	return set.Next(), nil
}

// scanNext is the streaming fast path; ok false means "ask Load". Only
// the lines up to the first pending leaf are parsed. If the file is known
// to be sorted (see knownSorted) that is where it stops; otherwise the rest
// are checked for order by their id alone, which proves no smaller id
// follows, and the file is then marked as sorted for the next call.
func (s *Store) scanNext() (*Task, bool, error) {
	f, fi, err := openIfExists(s.ActivePath)
	if f == nil || err != nil {
		return nil, false, err
	}
	defer f.Close()
	sorted := knownSorted(s.ActivePath, f)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 256*1024), 64<<20)
	var prev []byte    // id of the previous line (copied: the buffer is reused)
	var blocked []byte // id of a blocked container whose subtree is skipped
	var found *Task
	var t Task
	ln := 0
	for sc.Scan() {
		ln++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if found != nil {
			id, ok := quickID(line)
			if !ok {
				if parseLine(line, &t) != nil || t.ID == "" {
					return nil, false, nil
				}
				id = t.ID
			}
			if CompareIDs(bstr(prev), id) >= 0 {
				return nil, false, nil // not sorted: Load sorts
			}
			prev = append(prev[:0], id...)
			continue
		}
		if parseLine(line, &t) != nil || fieldProblems(&t) != nil || t.Status == StatusComplete {
			return nil, false, nil
		}
		if prev != nil && CompareIDs(bstr(prev), t.ID) >= 0 {
			return nil, false, nil
		}
		prev = append(prev[:0], t.ID...)
		if blocked != nil && isAncestor(bstr(blocked), t.ID) {
			continue
		}
		blocked = nil
		if t.flags&fLeafMissing != 0 {
			return nil, false, nil // leaf is derived from the tree: Load knows
		}
		if t.Status == StatusBlocked && !t.Leaf {
			blocked = append([]byte(nil), t.ID...)
			continue
		}
		if !t.Leaf || t.Status != StatusPending {
			continue
		}
		found = new(Task)
		if parseLine(slices.Clone(line), found) != nil {
			return nil, false, nil
		}
		found.line = int32(ln)
		if sorted {
			break // the file is known to be in order: nothing smaller follows
		}
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	if !sorted {
		markSortedAs(s.ActivePath, fi) // read to the end: all in order
	}
	if found != nil {
		if archived, err := s.mentionedInDone(found.ID); err != nil || archived {
			return nil, false, err
		}
	}
	return found, true, nil // whole file read, in order
}

// quickID takes the id of a line in the canonical form {"id":"…",….
func quickID(line []byte) (string, bool) {
	const prefix = `{"id":"`
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return "", false
	}
	rest := line[len(prefix):]
	i := bytes.IndexByte(rest, '"')
	if i < 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return "", false
	}
	return bstr(rest[:i]), true
}

// mentionedInDone is a quick check for the one case where a pending line
// must not be trusted: its task is already archived (interrupted Update).
func (s *Store) mentionedInDone(id string) (bool, error) {
	data, err := readFile(s.DonePath)
	if err != nil {
		return false, err
	}
	return bytes.Contains(data, []byte(`"`+id+`"`)), nil
}
