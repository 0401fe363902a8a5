package tasks

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sort"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
)

// CompleteFast completes leaf id like Update(Set.Complete) but in place:
// the archive lines are appended (with fsync) first, then the completed
// lines of tasks.jsonl are overwritten with spaces by single writes, so
// the file is never rewritten whole. Blank lines are ignored by every
// reader (and by grep pipelines over the file) and dropped at the next full
// write. It applies only to a file this package wrote and validated, as it
// still is (the same stamp as Next's sorted mark), with no claims held; ok
// false means "use Update", and nothing was changed.
//
// A kill -9 between the two writes leaves the task in both files, which
// Load already resolves in favour of the archive.
func (s *Store) CompleteFast(id, commit string, now time.Time) (done []*Task, ok bool, err error) {
	return s.completeFast(id, commit, now, false)
}

// ArchiveFast is CompleteFast for the loop that holds id (the hold file
// names it, and no other task): the leaf may carry the agent's claim
// ("status":"complete") or still be active. The hold stays; the loop
// clears it.
func (s *Store) ArchiveFast(id, commit string, now time.Time) (done []*Task, ok bool, err error) {
	return s.completeFast(id, commit, now, true)
}

func (s *Store) completeFast(id, commit string, now time.Time, loop bool) (done []*Task, ok bool, err error) {
	ok, err = s.inPlace(id, func(f io.WriterAt, data []byte) (bool, error) {
		held := s.Held()
		if loop && held[id] {
			delete(held, id)
		}
		if len(held) > 0 {
			return false, nil
		}
		type span struct{ start, end int }
		var blank []span
		leafStart, leafEnd, found := lineOf(data, id)
		if !found {
			return false, nil
		}
		var t Task
		// Parsed tasks share their line's bytes: copy them off the mapping.
		if parseLine(bytes.Clone(data[leafStart:leafEnd]), &t) != nil || fieldProblems(&t) != nil || t.flags&fLeafMissing != 0 ||
			!t.Leaf || t.Status == StatusComplete && !loop || loop && t.Status != StatusComplete && t.Status != StatusActive {
			return false, nil // the full path gives the precise error
		}
		stamp := func(t *Task) {
			t.Status = StatusComplete
			t.Completed = now.UTC().Format(time.RFC3339)
			if commit != "" {
				t.Commit = commit
			}
			t.flags |= fArchived
		}
		leaf := t
		stamp(&leaf)
		done = append(done, &leaf)
		blank = append(blank, span{leafStart, leafEnd})
		isBlanked := func(start int) bool {
			for _, b := range blank {
				if b.start == start {
					return true
				}
			}
			return false
		}
		// Parents whose subtasks are now all complete complete too. The
		// file is sorted, so a subtree is the lines right after its root.
		for pid := ParentID(id); pid != ""; pid = ParentID(pid) {
			ps, pe, found := lineOf(data, pid)
			if !found {
				break
			}
			if nextID, ok := nextLineID(data, pe, isBlanked); ok && isAncestor(pid, nextID) {
				break // still has unfinished subtasks
			}
			var p Task
			if parseLine(bytes.Clone(data[ps:pe]), &p) != nil || fieldProblems(&p) != nil || p.Status == StatusComplete {
				return false, errFallback
			}
			stamp(&p)
			done = append(done, &p)
			blank = append(blank, span{ps, pe})
		}
		var buf []byte
		for i, t := range done {
			if i > 0 {
				buf = append(buf, '\n')
			}
			buf = appendTask(buf, t)
		}
		if err := store.AppendLine(s.DonePath, buf); err != nil {
			return false, err
		}
		for _, b := range blank {
			if _, err := f.WriteAt(bytes.Repeat([]byte{' '}, b.end-b.start), int64(b.start)); err != nil {
				return false, err
			}
		}
		return true, nil
	}, func(set *Set) error {
		_, err := set.Complete(id, commit, now)
		return err
	})
	if errors.Is(err, errFallback) {
		return nil, false, nil
	}
	if !ok {
		done = nil
	}
	return done, ok, err
}

// ClaimFast marks pending leaf id active like Update(Set.Claim) but in
// place: its line is rewritten where it stands ("active" is shorter than
// "pending"; a space pads the line), so the file is never rewritten whole.
// Like CompleteFast it applies only to a file this package wrote and
// validated, as it still is; ok false means "use Update", and nothing was
// changed.
func (s *Store) ClaimFast(id string) (ok bool, err error) {
	err = store.WithLock(s.LockPath, func() (err error) {
		ok, err = s.ClaimFastLocked(id)
		return err
	})
	return ok, err
}

// ClaimFastLocked is ClaimFast for a caller that holds the store's lock
// (LockPath), to claim together with other changes.
func (s *Store) ClaimFastLocked(id string) (ok bool, err error) {
	return s.inPlaceLocked(id, func(f io.WriterAt, data []byte) (bool, error) {
		start, end, found := lineOf(data, id)
		if !found {
			return false, nil
		}
		var t Task
		if parseLine(bytes.Clone(data[start:end]), &t) != nil || fieldProblems(&t) != nil || t.flags&fLeafMissing != 0 ||
			!t.Leaf || t.Status != StatusPending {
			return false, nil
		}
		t.Status = StatusActive
		line := appendTask(nil, &t)
		if len(line) > end-start {
			return false, nil
		}
		line = append(line, bytes.Repeat([]byte{' '}, end-start-len(line))...)
		_, err := f.WriteAt(line, int64(start))
		return err == nil, err
	}, func(set *Set) error {
		_, err := set.Claim(id)
		return err
	})
}

// inPlace runs edit on tasks.jsonl under the store's lock, when the file
// is as this package wrote and validated it and task id is not in the
// archive; edit reads the file's bytes and writes its changes through f,
// and reports whether it wrote. What it wrote is synced and the file
// marked as ralph's again. ok false (and no error) means "use Update":
// nothing was changed.
//
// apply, when given, is the same change as the full update's on a Set:
// when the Store's last Load was of the files as they are, edit reads the
// bytes of that Load (the file is read into the new snapshot's bytes while
// it is compared with them, or not read at all while the Store's watch has
// seen nothing touch it), and the snapshot Load hands out is moved on by
// apply (patchCache) instead of being dropped, so the next Load needs no
// parse. Otherwise edit reads the file mapped into memory.
func (s *Store) inPlace(id string, edit func(f io.WriterAt, data []byte) (bool, error), apply func(set *Set) error) (ok bool, err error) {
	err = store.WithLock(s.LockPath, func() (err error) {
		ok, err = s.inPlaceLocked(id, edit, apply)
		return err
	})
	return ok, err
}

// inPlaceLocked is inPlace for a caller that holds the store's lock.
func (s *Store) inPlaceLocked(id string, edit func(f io.WriterAt, data []byte) (bool, error), apply func(set *Set) error) (ok bool, err error) {
	patched := false
	err = func() error {
		f, err := os.OpenFile(s.ActivePath, os.O_RDWR, 0)
		if err != nil {
			return nil
		}
		defer f.Close()
		if !knownValid(s.ActivePath, f) && !s.validate(f) {
			return nil
		}
		var prev *loadCache
		var copied []byte // the file's bytes read while comparing: the new snapshot's
		if apply != nil {
			if prev = s.untouched(); prev != nil && len(prev.set.warnings) == 0 && len(prev.set.shadowed) == 0 {
				copied = bytes.Clone(prev.active) // the files are as read: no need to read them
			} else if prev, copied, err = s.cachedAs(f); err != nil {
				return err
			}
		}
		// Is the task already in the archive (an interrupted completion)?
		// A snapshot of both files as they are knows; so does the archive's
		// mark, while it says no task of this file is archived (then the
		// edit keeps that so, and renews the mark); else read the archive.
		agree := prev == nil && archiveAsMarked(s.ActivePath, s.DonePath)
		if prev != nil {
			if prev.set.archived(id) != nil {
				return nil
			}
		} else if !agree {
			if archived, err := s.mentionedInDone(id); err != nil || archived {
				return err
			}
		}
		var data []byte
		if prev != nil {
			data = prev.active
		} else {
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			var release func()
			if data, release, err = mapFile(f, fi.Size()); err != nil {
				return err
			}
			defer release()
		}
		w := &writeLog{f: f}
		if ok, err = edit(w, data); err != nil || !ok {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		markSorted(s.ActivePath)
		markValid(s.ActivePath)
		if agree || prev != nil {
			markArchive(s.ActivePath, s.DonePath)
		}
		s.forget()
		if prev != nil {
			s.patchCache(prev, copied, w.writes, apply)
			patched = true
		}
		return nil
	}()
	if patched {
		s.ownWrites() // after the file is closed: its closing is reported too
	}
	return ok, err
}

// validate reads and checks tasks.jsonl (open as f), when no stamp says
// it is as this package left it (someone else wrote it), and stamps it
// when it is valid and already as a full write would write it (sorted, no
// field to fill in, nothing to repair): then the in-place edit applies,
// and a one-off command's first change after someone else's edit does not
// rewrite 100,000 lines. Only for a Store that has read nothing before (a
// one-off command): a loop rewrites the file the first time instead, so
// that it no longer has the size git recorded for it (a file tracked by
// git that keeps its size while it changes is read whole by every git
// status that looks at it). Called under the store's lock.
func (s *Store) validate(f *os.File) bool {
	before, err := f.Stat()
	if err != nil {
		return false
	}
	s.cacheMu.Lock()
	had := s.cache != nil
	s.cacheMu.Unlock()
	if had {
		return false
	}
	// The snapshot made here would be kept up to date for no later reader.
	defer s.forget()
	archive := archiveStamp(s.DonePath)
	set, err := s.Load()
	if err != nil || len(set.warnings) > 0 || len(set.shadowed) > 0 || set.changed {
		return false
	}
	for i := range set.active {
		if set.needsWrite(&set.active[i]) {
			return false
		}
	}
	now, err := os.Stat(s.ActivePath)
	if err != nil || sortedStamp(now) != sortedStamp(before) {
		return false // changed while it was read
	}
	markSortedAs(s.ActivePath, before)
	markValid(s.ActivePath)
	if archive != "" && archiveStamp(s.DonePath) == archive { // the archive read with it, as it still is
		markArchive(s.ActivePath, s.DonePath)
	}
	return knownValid(s.ActivePath, f)
}

// writeLog writes to f and keeps what it wrote where.
type writeLog struct {
	f      *os.File
	writes []written
}

type written struct {
	off int
	b   []byte
}

func (w *writeLog) WriteAt(b []byte, off int64) (int, error) {
	n, err := w.f.WriteAt(b, off)
	w.writes = append(w.writes, written{int(off), bytes.Clone(b[:n])})
	return n, err
}

// cachedAs is the Store's last Load when it was of the files as they are
// (f, open on tasks.jsonl, holding its bytes), else nil; copied is a copy
// of those bytes, made by reading f into it while comparing (one pass over
// the file, where comparing and then copying the cached bytes makes two).
func (s *Store) cachedAs(f *os.File) (c *loadCache, copied []byte, err error) {
	s.cacheMu.Lock()
	c = s.cache
	s.cacheMu.Unlock()
	if c == nil || c.active == nil || len(c.set.warnings) > 0 || len(c.set.shadowed) > 0 {
		return nil, nil, nil
	}
	if copied, err = readIfSame(f, c.active); err != nil || copied == nil {
		return nil, nil, err
	}
	if _, ok := s.doneAsCached(c); ok {
		return c, copied, nil // the watch saw nothing touch the archive
	}
	if done, err := readUnlessSame(s.DonePath, c.done); err != nil || !bytes.Equal(c.done, done) {
		return nil, nil, err
	}
	return c, copied, nil
}

// patchCache makes the snapshot of the files after an in-place edit from
// prev, the snapshot of the files before it: active is a copy of prev's
// bytes of tasks.jsonl, which the edit's writes are made to (it becomes
// the snapshot's), and apply makes on a copy of prev's Set the change the
// edit made on disk. An in-place edit keeps every line where it was (a
// rewritten line is padded, a removed one blanked) and appends the
// archived tasks to tasks-done.jsonl, so every record keeps its offsets.
// What the edit wrote is checked against what apply did: a changed task's
// line must be its new encoding, no other task's line written to, the
// appended lines the archived tasks. Anything that does not fit leaves the
// cache empty: the next Load parses.
func (s *Store) patchCache(prev *loadCache, active []byte, writes []written, apply func(set *Set) error) {
	done, err := readAppended(s.DonePath, prev.done)
	if err != nil || done == nil || len(done) > 1<<32-1 || len(active) != len(prev.active) {
		return
	}
	for _, w := range writes {
		if w.off+len(w.b) > len(active) {
			return
		}
		copy(active[w.off:], w.b)
	}
	set := prev.set.forUpdate()
	if apply(set) != nil || len(set.warnings) > 0 {
		return
	}
	for i := range set.active {
		e := &set.active[i]
		if e.n == 0 {
			return // added by apply: not an edit in place
		}
		t := set.t(e)
		if t == nil {
			continue
		}
		if t.dirty() { // changed by apply: its line was rewritten
			line := bytes.TrimRight(active[e.off:e.off+e.n], " ")
			if !bytes.Equal(line, appendTask(nil, t)) {
				return
			}
			e.n, e.status, e.leaf = uint32(len(line)), statusCode(t.Status), t.Leaf
			e.idOff, e.idLen = e.off+uint32(len(`{"id":"`)), uint32(len(t.ID))
			e.flags &^= fLeafMissing | fStatusMissing | fIDAside
			e.flags |= fPatched
		}
		e.tk = 0
	}
	// Every line written to is one apply changed (or removed).
	for _, w := range writes {
		i := sort.Search(len(set.active), func(i int) bool { return int(set.active[i].off+set.active[i].n) > w.off })
		for ; i < len(set.active) && int(set.active[i].off) < w.off+len(w.b); i++ {
			if set.active[i].flags&fPatched == 0 {
				return
			}
		}
	}
	for i := range set.active {
		set.active[i].flags &^= fPatched
	}
	appended := bytes.Split(bytes.TrimSuffix(done[len(prev.done):], []byte{'\n'}), []byte{'\n'})
	if len(done) == len(prev.done) {
		appended = nil
	}
	n := len(set.archivedNow)
	if len(appended) != n || len(set.done) < n {
		return
	}
	for i := range set.done[:len(set.done)-n] {
		set.done[i].tk = 0
	}
	lastLine := bytes.Count(prev.done, []byte{'\n'})
	off := len(prev.done)
	for k, t := range set.archivedNow {
		e := &set.done[len(set.done)-n+k]
		if set.t(e) != t || !bytes.Equal(appended[k], appendTask(nil, t)) {
			return
		}
		e.off, e.n, e.line, e.tk = uint32(off), uint32(len(appended[k])), int32(lastLine+k+1), 0
		e.idOff, e.idLen = e.off+uint32(len(`{"id":"`)), uint32(len(t.ID))
		off += len(appended[k]) + 1
	}
	set.data, set.doneData = active, done
	set.archivedNow, set.changed = nil, false
	set.changing, set.tasks = false, nil
	set.gen, set.from = nextGen(), 0
	set.index()
	s.cacheMu.Lock()
	s.cache = &loadCache{active: active, done: done, set: set}
	s.cacheMu.Unlock()
}

var errFallback = errors.New("fall back to the full update")

// lineOf finds the line of task id in data, a file this package wrote or
// validated (see inPlaceLocked): start and end offsets without the
// newline. Such a file is sorted by CompareIDs with one task per line and
// blanks (lines of spaces) where tasks were archived in place, so the
// line is found by bisection: a few lines read, not the 7 MB of 100,000
// tasks (whose every line starts like the one sought, which is what makes
// a plain search slow). A line not in canonical form, which such a file
// does not have, sends it to the plain search.
func lineOf(data []byte, id string) (int, int, bool) {
	lo, hi := 0, len(data) // the line sought, if any, starts in [lo, hi); lo starts a line
	for lo < hi {
		mid := lo + (hi-lo)/2
		start := lo + bytes.LastIndexByte(data[lo:mid], '\n') + 1 // the line mid is in
		t := start                                                // the first task line from there
		for {
			end := lineEnd(data, t)
			if !isBlank(data[t:end]) {
				break
			}
			if t = end + 1; t >= hi {
				break
			}
		}
		if t >= hi {
			hi = start // only blanks from start on
			continue
		}
		end := lineEnd(data, t)
		other, ok := quickID(data[t:end])
		if !ok {
			return lineOfScan(data, id)
		}
		switch c := CompareIDs(id, other); {
		case c == 0:
			return t, end, true
		case c < 0:
			hi = start
		default:
			lo = end + 1
		}
	}
	return 0, 0, false
}

// lineEnd is the offset of the newline ending the line that starts at
// start (or the end of data).
func lineEnd(data []byte, start int) int {
	if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
		return start + i
	}
	return len(data)
}

func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// lineOfScan is lineOf by a plain search of the whole file.
func lineOfScan(data []byte, id string) (int, int, bool) {
	needle := []byte(`{"id":"` + id + `",`)
	from := 0
	for {
		i := bytes.Index(data[from:], needle)
		if i < 0 {
			return 0, 0, false
		}
		i += from
		if i == 0 || data[i-1] == '\n' {
			end := bytes.IndexByte(data[i:], '\n')
			if end < 0 {
				end = len(data) - i
			}
			return i, i + end, true
		}
		from = i + 1
	}
}

// nextLineID is the id of the first non-blank line after offset end
// (skipping lines about to be blanked).
func nextLineID(data []byte, end int, skip func(start int) bool) (string, bool) {
	i := end
	for i < len(data) {
		if data[i] == '\n' {
			i++
			continue
		}
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			j = len(data) - i
		}
		line := data[i : i+j]
		if len(bytes.TrimSpace(line)) > 0 && !skip(i) {
			return quickID(bytes.TrimSpace(line))
		}
		i += j
	}
	return "", false
}
