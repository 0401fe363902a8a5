package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ralph-loop/ralph/internal/store"
)

// entry is one line of a file. Lines are checked when read but turned into
// a Task only when someone asks for it, so a 100,000-line file costs a
// small record per line, and untouched lines are written back as read.
// A record points at its line by offsets into its file's bytes (the Set's
// data, or doneData for the archive) and holds one pointer, the Task once
// read: a copy of 100,000 records is a few megabytes the garbage collector
// barely looks at.
type entry struct {
	off, n uint32 // the line is buf[off:off+n]; n 0 for a task added since (its Task holds it)
	idOff  uint32 // the id is buf[idOff:idOff+idLen], or Set.names[idOff] (fIDAside)
	idLen  uint32
	tk     uint32 // in a Set being changed: 1 + index of its Task in Set.tasks, 0 until read
	line   int32
	status uint8 // as read: a statusCode
	leaf   bool
	flags  uint8
}

// Status codes of records.
const (
	codePending uint8 = iota
	codeActive
	codeBlocked
	codeComplete
	codeOther // an invalid status: the Set is never handed out
)

var statusOfCode = [...]string{StatusPending, StatusActive, StatusBlocked, StatusComplete, ""}

func statusCode(s string) uint8 {
	switch s {
	case StatusPending:
		return codePending
	case StatusActive:
		return codeActive
	case StatusBlocked:
		return codeBlocked
	case StatusComplete:
		return codeComplete
	}
	return codeOther
}

// t is e's Task if read in a Set being changed, else nil.
func (set *Set) t(e *entry) *Task {
	if e.tk == 0 {
		return nil
	}
	return set.tasks[e.tk-1]
}

// keep makes t e's Task in a Set being changed.
func (set *Set) keep(e *entry, t *Task) {
	set.tasks = append(set.tasks, t)
	e.tk = uint32(len(set.tasks))
}

func (set *Set) status(e *entry) string {
	if t := set.t(e); t != nil {
		return t.Status
	}
	return statusOfCode[e.status]
}

func (set *Set) leaf(e *entry) bool {
	if t := set.t(e); t != nil {
		return t.Leaf
	}
	return e.leaf
}

func (set *Set) needsWrite(e *entry) bool {
	if t := set.t(e); t != nil {
		return t.dirty()
	}
	return e.n == 0 || e.flags&(fLeafMissing|fStatusMissing) != 0
}

// buf is the file e's offsets are into.
func (set *Set) buf(e *entry) []byte {
	if e.flags&fArchived != 0 {
		return set.doneData
	}
	return set.data
}

// raw is e's line as read, nil for a task added since.
func (set *Set) raw(e *entry) []byte {
	if e.n == 0 {
		return nil
	}
	return set.buf(e)[e.off : e.off+e.n : e.off+e.n]
}

// id is e's id as read (a task added since: its Task's).
func (set *Set) id(e *entry) string {
	switch {
	case e.flags&fIDAside != 0:
		return set.names[e.idOff]
	case e.n == 0:
		return set.t(e).ID
	}
	return bstr(set.buf(e)[e.idOff : e.idOff+e.idLen])
}

// task materializes e. The Task reads a copy of its line: its strings
// share that copy, never the file's bytes, so a Task kept by a caller (an
// item's id and title in the run's state) does not keep a 100,000-task
// file in memory. A Set being changed (inside Update) keeps the Task, so
// that changes to it are written; a snapshot, which many may read at
// once, gives a new one each time and is never written to.
func (set *Set) task(e *entry) *Task {
	if t := set.t(e); t != nil {
		return t
	}
	t := new(Task)
	_ = parseLine(bytes.Clone(set.raw(e)), t) // checked when read
	t.line = e.line
	t.flags |= e.flags & fArchived
	t.Leaf = e.leaf // may be derived from the tree
	if e.flags&fArchived != 0 {
		t.Status = StatusComplete // hand-written archive lines may have no status
	}
	if set.changing {
		set.keep(e, t)
	}
	return t
}

// record makes the record of a line of buf (line and t.ID share its
// bytes, or the id was unescaped: it goes to *names).
func record(buf, line []byte, t *Task, ln int, flags uint8, names *[]string) (entry, bool) {
	off, ok := offsetIn(buf, line)
	if !ok || uint64(len(buf)) > 1<<32-1 {
		return entry{}, false
	}
	e := entry{off: uint32(off), n: uint32(len(line)), line: int32(ln), status: statusCode(t.Status), leaf: t.Leaf, flags: flags}
	if k, ok := offsetIn(buf, unsafe.Slice(unsafe.StringData(t.ID), len(t.ID))); ok {
		e.idOff, e.idLen = uint32(k), uint32(len(t.ID))
	} else {
		e.idOff, e.flags = uint32(len(*names)), e.flags|fIDAside
		*names = append(*names, t.ID)
	}
	return e, true
}

// Set is the loaded content of both files. Use it inside Update to change
// tasks; a Set from Load is a read-only snapshot.
type Set struct {
	activeName, doneName string
	data                 []byte   // tasks.jsonl, which active and shadowed records point into
	doneData             []byte   // tasks-done.jsonl, which archived records point into
	names                []string // ids that are not as such in their line (escaped)
	changing             bool     // a copy Update changes (see task)
	tasks                []*Task  // the Tasks read while changing (entry.tk)
	// gen tells Sets apart; a Set made by reparse from the Set of
	// generation from changed its active[span[0]:span[1]] into
	// active[span[0]:span[2]] (from 0: not so made).
	gen, from uint64
	span      [3]int
	// A snapshot lists its records that are not pending, and counts its
	// pending leaves (see index).
	indexed       bool
	notPending    []int32
	pendingLeaves int

	active  []entry       // sorted by CompareIDs
	done    []entry       // archive, in file order
	archIdx *archiveIndex // finds done[:archIdx.len()] by id (see archived)

	shadowed    []entry // active lines whose task is already archived
	archivedNow []*Task // archived by this Update, to append
	changed     bool    // tasks added/removed/reordered since load
	warnings    []string
	now         func() time.Time
}

var generations atomic.Uint64

func nextGen() uint64 { return generations.Add(1) }

// Warnings are things Load skipped or will repair on the next Update: a
// torn last line, tasks left in both files by an interrupted completion.
func (s *Set) Warnings() []string { return s.warnings }

// Load reads and validates both files. A missing file reads as empty.
// Anything invalid, a torn last line of tasks.jsonl (an append cut short)
// included, is a *ValidationError naming file:line for every problem.
//
// The Set is a read-only snapshot, so a Load that finds both files byte
// for byte as the Store's last Load found them returns that Set again
// without parsing (a loop loads a 100,000-task tree several times per
// iteration; reading and comparing the bytes costs a fraction of parsing
// them, and no file time stamp can fool it). When only a few lines of
// tasks.jsonl changed (an agent's `ralph task complete`), only those are
// parsed (see reparse).
func (s *Store) Load() (*Set, error) {
	if c := s.untouched(); c != nil {
		return c.set, nil
	}
	data, doneData, sh, err := s.readBoth()
	if err != nil {
		return nil, err
	}
	set, err := s.loadBytes(data, doneData, sh)
	if err == nil {
		s.cacheMu.Lock()
		s.fresh = 0
		if s.watch != nil && s.cache != nil && s.cache.set == set { // as read after the watch was asked
			s.fresh = bothFiles
		}
		s.cacheMu.Unlock()
	}
	return set, err
}

// Watch makes the Store watch the files, for a process that reads them
// often (a loop): while the kernel reports nothing touching them, Load
// hands out its last snapshot and an in-place edit starts from its bytes
// without reading the files again. Only on Linux, on a local file system;
// elsewhere (or with no inotify instance left) the files are compared as
// before. Close ends the watch.
func (s *Store) Watch() {
	w := newWatcher(s.ActivePath, s.DonePath)
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.watch == nil {
		s.watch, s.fresh = w, 0
	} else {
		w.close()
	}
}

// Close ends Watch.
func (s *Store) Close() {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	s.watch.close()
	s.watch, s.fresh = nil, 0
}

// untouched is the last Load when the watch has seen nothing touch the
// files since it was made as they were (nil: read them). Asking the watch
// drains its queue: events from now on are seen by the next call.
func (s *Store) untouched() *loadCache {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.watch == nil {
		return nil
	}
	s.fresh &^= s.watch.touched()
	if s.fresh != bothFiles || s.cache == nil {
		// Read next: the files now there are watched from before that.
		s.watch.watchFiles()
		return nil
	}
	return s.cache
}

// ownWrites is called under the store's lock right after this Store wrote
// the files and made its cache of what it wrote: the events queued are its
// own (no writer of these files writes without the lock, and one that does
// is no more covered here than between an in-place edit's comparison and
// its write), so the cache is as the files are.
func (s *Store) ownWrites() {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.watch == nil {
		return
	}
	s.watch.watchFiles() // a rename put a new file in place
	s.watch.touched()
	s.fresh = 0
	if s.cache != nil {
		s.fresh = bothFiles
	}
}

// doneAsCached is the archive's bytes in c, the last Load, when the watch
// has seen nothing touch tasks-done.jsonl since (ok false: read it). Like
// untouched, it drains the watch's queue.
func (s *Store) doneAsCached(c *loadCache) (done []byte, ok bool) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.watch == nil || s.cache == nil || s.cache != c {
		return nil, false
	}
	s.fresh &^= s.watch.touched()
	if s.fresh&doneFile == 0 {
		return nil, false
	}
	return s.cache.done, true
}

// LoadBytes is Load of contents the caller has read (nil: a missing file),
// for a caller that keeps the bytes too.
func (s *Store) LoadBytes(data, doneData []byte) (*Set, error) {
	return s.loadBytes(data, doneData, nil)
}

// loadBytes is LoadBytes with what readBoth found data shares with the
// last Load's bytes (nil: unknown).
func (s *Store) loadBytes(data, doneData []byte, sh *shared) (*Set, error) {
	s.cacheMu.Lock()
	c := s.cache
	s.cacheMu.Unlock()
	if c != nil && bytes.Equal(c.active, data) && bytes.Equal(c.done, doneData) {
		return c.set, nil
	}
	var set *Set
	if c != nil {
		set = s.reparse(c, data, doneData, sh)
	}
	if set == nil {
		var err error
		if set, err = s.parse(data, doneData); err != nil {
			return nil, err
		}
	}
	s.cacheMu.Lock()
	s.cache, s.fresh = &loadCache{active: data, done: doneData, set: set}, 0
	s.cacheMu.Unlock()
	return set, nil
}

// Latest is the snapshot of the files as this Store last read or wrote
// them, with their bytes (nil for a missing file), without reading them
// again (set nil when there is none): for a caller that has just changed
// them through the Store and either holds the store's lock since or reads
// them again before it relies on them.
func (s *Store) Latest() (set *Set, active, done []byte) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.cache == nil {
		return nil, nil, nil
	}
	return s.cache.set, s.cache.active, s.cache.done
}

// loadCache is the last Load: the files' bytes and their Set.
type loadCache struct {
	active, done []byte
	set          *Set
}

// ReadBoth reads tasks.jsonl and tasks-done.jsonl (nil for a missing
// file). A file that still holds, byte for byte, what the Store's last
// Load read is returned as those same bytes (which nobody changes): it is
// compared through a small buffer, so a loop that reads an unchanged
// 100,000-task file several times per iteration allocates nothing for it.
func (s *Store) ReadBoth() (data, doneData []byte, err error) {
	data, doneData, _, err = s.readBoth()
	return data, doneData, err
}

// readBoth is ReadBoth that also tells, when tasks.jsonl changed, what
// the new bytes share with the last Load's (found while reading them).
func (s *Store) readBoth() (data, doneData []byte, sh *shared, err error) {
	s.cacheMu.Lock()
	c := s.cache
	s.cacheMu.Unlock()
	var wasActive, wasDone []byte
	if c != nil {
		wasActive, wasDone = c.active, c.done
	}
	if data, sh, err = readChanged(s.ActivePath, wasActive); err != nil {
		return nil, nil, nil, err
	}
	if done, ok := s.doneAsCached(c); ok {
		return data, done, sh, nil // the agent wrote tasks.jsonl only: the archive is as read
	}
	if doneData, err = readUnlessSame(s.DonePath, wasDone); err != nil {
		return nil, nil, nil, err
	}
	return data, doneData, sh, nil
}

// shared is what data, a new reading of a file, has in common with was,
// the bytes of an earlier one: the lengths of their longest common prefix
// and suffix.
type shared struct {
	was, data      *byte // the first bytes, to recognise the two
	prefix, suffix int
}

// readChanged is readUnlessSame for a large file that changes a little:
// it compares through a small buffer while the file is as was, and reads
// the rest of a changed file into the new bytes, finding as it goes the
// prefix and suffix they share with was (which a partial parse needs, see
// reparse), so the file is read once and each part compared while it is
// fresh in the processor's cache.
func readChanged(path string, was []byte) ([]byte, *shared, error) {
	if was == nil {
		data, err := readFile(path)
		return data, nil, err
	}
	f, fi, err := openIfExists(path)
	if f == nil || err != nil {
		return nil, nil, err
	}
	defer f.Close()
	size := fi.Size()
	if size > 1<<40 {
		data, err := readFile(path)
		return data, nil, err
	}
	off := 0
	if int(size) == len(was) {
		bp := compareBuf.Get().(*[]byte)
		buf := *bp
		for off < len(was) {
			n, err := f.ReadAt(buf[:min(len(buf), len(was)-off)], int64(off))
			if n == 0 || !bytes.Equal(buf[:n], was[off:off+n]) {
				break
			}
			off += n
			if err != nil && !errors.Is(err, io.EOF) {
				compareBuf.Put(bp)
				return nil, nil, err
			}
		}
		compareBuf.Put(bp)
		if off == len(was) && !longer(f, int64(len(was))) {
			return was, nil, nil
		}
	}
	data := make([]byte, size)
	copy(data, was[:off]) // compared equal
	sh := &shared{prefix: off}
	prefixDone := false
	delta := len(data) - len(was) // data[i] stands against was[i-delta] in a common suffix
	lastDiff := -1                // the last byte of data read so far that differs there
	const part = 256 << 10
	for off < len(data) {
		n, err := f.ReadAt(data[off:min(off+part, len(data))], int64(off))
		if n == 0 {
			data, err := readFile(path) // cut short meanwhile
			return data, nil, err
		}
		chunk := data[off : off+n]
		if !prefixDone {
			k := 0
			if off < len(was) {
				k = commonPrefix(chunk, was[off:])
			}
			sh.prefix = off + k
			prefixDone = k < n
		}
		lo, hi := max(off, delta), off+n
		if lo > off {
			lastDiff = lo - 1 // no counterpart in was
		}
		if lo < hi {
			if k := commonSuffix(data[lo:hi], was[lo-delta:hi-delta]); k < hi-lo {
				lastDiff = hi - k - 1
			}
		}
		off += n
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
	}
	if longer(f, int64(len(data))) {
		data, err := readFile(path) // grown meanwhile
		return data, nil, err
	}
	sh.suffix = len(data) - 1 - lastDiff
	if len(was) > 0 && len(data) > 0 {
		sh.was, sh.data = &was[0], &data[0]
	}
	return data, sh, nil
}

// longer reports whether f has a byte at offset size.
func longer(f *os.File, size int64) bool {
	n, _ := f.ReadAt(make([]byte, 1), size)
	return n != 0
}

func (s *Store) parse(data, doneData []byte) (*Set, error) {
	set := &Set{activeName: s.ActivePath, doneName: s.DonePath, now: s.now, data: data, doneData: doneData, gen: nextGen()}
	var probs []Problem
	probs = set.parseActive(data, probs)
	probs = set.parseDone(doneData, probs)
	if len(probs) == 0 {
		set.findShadowed()
		p, _ := set.check(nil)
		probs = append(probs, p...)
	}
	if len(probs) > 0 {
		return nil, &ValidationError{probs}
	}
	set.index()
	return set, nil
}

// index makes a snapshot's list of the records that are not pending and
// its count of pending leaves: a run asks for the few claimed, blocked or
// completed tasks among 100,000 several times per iteration.
func (set *Set) index() {
	set.notPending, set.pendingLeaves = nil, 0
	for i := range set.active {
		e := &set.active[i] // a snapshot's record has no Task: its codes say it all
		switch {
		case e.status != codePending || e.n == 0:
			set.notPending = append(set.notPending, int32(i))
		case e.leaf:
			set.pendingLeaves++
		}
	}
	set.archIdx = indexArchive(set, set.archIdx)
	set.indexed = true
}

func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// openIfExists opens path and reads its info; f is nil, with no error,
// when there is no such file.
func openIfExists(path string) (f *os.File, fi os.FileInfo, err error) {
	f, err = os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readAppended is the file at path when it is was with bytes appended: was
// itself, extended by the bytes after it (nil when the file is shorter).
// Only the appended bytes are read; that the rest is still was is the
// caller's knowledge (see patchCache). The bytes go into was's spare
// capacity when it has some, as the archive's bytes grow by appends: only
// the one successor of a snapshot extends them, and a slice of the
// snapshot's length never sees what lies beyond it.
func readAppended(path string, was []byte) ([]byte, error) {
	f, fi, err := openIfExists(path)
	if err != nil {
		return nil, err
	}
	if f == nil { // missing: as it was only if it was empty
		if len(was) == 0 {
			return []byte{}, nil
		}
		return nil, nil
	}
	defer f.Close()
	n := fi.Size() - int64(len(was))
	if n < 0 || n > 1<<32 {
		return nil, nil
	}
	out := slices.Grow(was, int(n))[:len(was)+int(n)]
	if got, err := f.ReadAt(out[len(was):], int64(len(was))); got < int(n) {
		if errors.Is(err, io.EOF) {
			err = nil // it shrank meanwhile
		}
		return nil, err
	}
	return out, nil
}

// compareBuf is the buffer readChanged compares an unchanged file through.
var compareBuf = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// readUnlessSame is readFile(path), or was itself when the file holds
// exactly was (a non-nil was: nil stands for a missing file).
func readUnlessSame(path string, was []byte) ([]byte, error) {
	data, _, err := readChanged(path, was)
	return data, err
}

// readIfSame reads the file f into a new buffer, comparing each part with
// was as it arrives; nil means the file does not hold exactly was.
func readIfSame(f *os.File, was []byte) ([]byte, error) {
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(was)) {
		return nil, err
	}
	buf := make([]byte, len(was))
	const part = 256 << 10
	for off := 0; off < len(buf); {
		n, err := f.ReadAt(buf[off:min(off+part, len(buf))], int64(off))
		if n == 0 || !bytes.Equal(buf[off:off+n], was[off:off+n]) {
			return nil, nil
		}
		off += n
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	if longer(f, int64(len(buf))) {
		return nil, nil
	}
	return buf, nil
}

// lines calls fn for every non-blank line of data with its 1-based number
// and whether it is the last non-blank line.
func lines(data []byte, fn func(n int, line []byte, last bool)) {
	n := 0
	for len(data) > 0 {
		n++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		last := len(bytes.TrimSpace(data)) == 0
		fn(n, line, last)
	}
}

func invalidJSON(line []byte, err error) string {
	var v any
	if jerr := json.Unmarshal(line, &v); jerr != nil {
		return "invalid JSON: " + jerr.Error()
	}
	return "invalid JSON: " + err.Error()
}

// chunk is a part of tasks.jsonl parsed on its own goroutine.
type chunk struct {
	data     []byte
	lineBase int  // lines before the chunk
	final    bool // holds the file's last line
	entries  []entry
	names    []string // ids aside (fIDAside), numbered from 0 in this chunk
	probs    []Problem
	warnings []string
	unsorted bool
}

// splitLines cuts data into about k parts at line ends.
func splitLines(data []byte, k int) []*chunk {
	var out []*chunk
	base := 0
	for k > 1 && len(data) > 0 {
		cut := len(data) / k
		i := bytes.IndexByte(data[cut:], '\n')
		if i < 0 || len(bytes.TrimSpace(data[cut+i+1:])) == 0 {
			break
		}
		part := data[:cut+i+1]
		out = append(out, &chunk{data: part, lineBase: base})
		base += bytes.Count(part, []byte{'\n'})
		data = data[cut+i+1:]
		k--
	}
	return append(out, &chunk{data: data, lineBase: base, final: true})
}

func (set *Set) parseChunk(c *chunk) {
	var t Task // scratch: its strings point into the file's bytes
	prev := ""
	lines(c.data, func(n int, line []byte, last bool) {
		ln := c.lineBase + n
		if err := parseLine(line, &t); err != nil {
			var se *syntaxError
			if errors.As(err, &se) {
				if last && c.final {
					// Never dropped (its id would be handed out again):
					// a person finishes or deletes it.
					c.probs = append(c.probs, Problem{File: set.activeName, Line: ln,
						Msg: "the last line is cut short, a write to the file was interrupted (" + invalidJSON(line, err) + "): finish the line or delete it"})
					return
				}
				c.probs = append(c.probs, Problem{File: set.activeName, Line: ln, Msg: invalidJSON(line, err)})
				return
			}
			c.probs = append(c.probs, Problem{File: set.activeName, Line: ln, ID: t.ID, Msg: err.Error()})
			return
		}
		for _, m := range fieldProblems(&t) {
			c.probs = append(c.probs, Problem{File: set.activeName, Line: ln, ID: t.ID, Msg: m})
		}
		if prev != "" && CompareIDs(prev, t.ID) >= 0 {
			c.unsorted = true // unsorted (or duplicate): rewrite sorted
		}
		prev = t.ID
		e, ok := record(set.data, line, &t, ln, t.flags&(fLeafMissing|fStatusMissing), &c.names)
		if !ok {
			c.probs = append(c.probs, Problem{File: set.activeName, Line: ln, Msg: "the file is larger than 4 GiB"})
			return
		}
		c.entries = append(c.entries, e)
	})
}

// addNames moves c's aside ids to set.names, renumbering its records.
func (set *Set) addNames(c *chunk) {
	if len(c.names) == 0 {
		return
	}
	base := uint32(len(set.names))
	set.names = append(set.names, c.names...)
	for i := range c.entries {
		if c.entries[i].flags&fIDAside != 0 {
			c.entries[i].idOff += base
		}
	}
}

func (set *Set) parseActive(data []byte, probs []Problem) []Problem {
	k := 1
	if len(data) >= 1<<20 {
		k = min(runtime.GOMAXPROCS(0), 4)
	}
	chunks := splitLines(data, k)
	// One array for all: each chunk appends into its own window (sized by
	// its line count, so never reallocated), then the windows are packed.
	total := 0
	for _, c := range chunks {
		total += bytes.Count(c.data, []byte{'\n'}) + 1
	}
	all := make([]entry, total)
	off := 0
	for _, c := range chunks {
		n := bytes.Count(c.data, []byte{'\n'}) + 1
		c.entries = all[off : off : off+n]
		off += n
	}
	if len(chunks) == 1 {
		set.parseChunk(chunks[0])
	} else {
		var wg sync.WaitGroup
		for _, c := range chunks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				set.parseChunk(c)
			}()
		}
		wg.Wait()
	}
	set.active = all[:0]
	for _, c := range chunks {
		set.addNames(c)
		if len(c.entries) > 0 && len(set.active) > 0 && CompareIDs(set.id(&set.active[len(set.active)-1]), set.id(&c.entries[0])) >= 0 {
			c.unsorted = true
		}
		set.active = append(set.active, c.entries...)
		probs = append(probs, c.probs...)
		set.warnings = append(set.warnings, c.warnings...)
		set.changed = set.changed || c.unsorted
		c.entries = nil
	}
	if len(probs) > 0 {
		return probs
	}
	if set.changed {
		slices.SortStableFunc(set.active, func(a, b entry) int { return CompareIDs(set.id(&a), set.id(&b)) })
	}
	for i := 1; i < len(set.active); i++ {
		a, b := &set.active[i-1], &set.active[i]
		if id := set.id(a); id == set.id(b) {
			first, second := a, b
			if second.line < first.line {
				first, second = second, first
			}
			probs = append(probs, Problem{File: set.activeName, Line: int(second.line), ID: id,
				Msg: fmt.Sprintf("duplicate id (also on line %d)", first.line)})
		}
	}
	return probs
}

// fieldProblems checks one task's own fields.
func fieldProblems(t *Task) []string {
	var out []string
	if t.ID == "" {
		out = append(out, `missing "id"`)
	} else if !ValidID(t.ID) {
		out = append(out, fmt.Sprintf("invalid id %q: use segments of letters, digits, _ or - separated by single dots (A, A.1, A.1.2)", t.ID))
	}
	if strings.TrimSpace(t.Title) == "" {
		out = append(out, `missing "title"`)
	}
	if !ValidStatus(t.Status) {
		out = append(out, fmt.Sprintf("unknown status %q (want pending, active, blocked or complete)", t.Status))
	}
	return out
}

// parseDone reads the archive: lines only need to be JSON with an id.
func (set *Set) parseDone(data []byte, probs []Problem) []Problem {
	if len(data) == 0 {
		return probs
	}
	set.done = make([]entry, 0, bytes.Count(data, []byte{'\n'})+1)
	var t Task
	lines(data, func(ln int, line []byte, last bool) {
		err := parseLine(line, &t)
		var se *syntaxError
		if errors.As(err, &se) {
			if last {
				set.warnings = append(set.warnings, fmt.Sprintf("%s:%d: skipped torn last line (%s)", set.doneName, ln, invalidJSON(line, err)))
				return
			}
			probs = append(probs, Problem{File: set.doneName, Line: ln, Msg: invalidJSON(line, err)})
			return
		}
		if t.ID == "" {
			probs = append(probs, Problem{File: set.doneName, Line: ln, Msg: `missing "id"`})
			return
		}
		t.Status = StatusComplete
		e, ok := record(set.doneData, line, &t, ln, fArchived, &set.names)
		if !ok {
			probs = append(probs, Problem{File: set.doneName, Line: ln, Msg: "the file is larger than 4 GiB"})
			return
		}
		set.done = append(set.done, e)
	})
	return probs
}

// archived finds id in the archive (its first record there).
func (set *Set) archived(id string) *entry {
	if len(set.done) == 0 {
		return nil
	}
	x := set.archiveIndex()
	if i, ok := x.find(id); ok {
		return &set.done[i]
	}
	for i := x.len(); i < len(set.done); i++ {
		if set.id(&set.done[i]) == id {
			return &set.done[i]
		}
	}
	return nil
}

// archiveIndex is the Set's index of its archive. A snapshot's is made
// with it (see index) and never changed, as other goroutines may read the
// snapshot; a Set not yet handed out (being parsed, or changed inside
// Update) extends its own when more than a few records are missing from
// it, and searches those few.
func (set *Set) archiveIndex() *archiveIndex {
	if (!set.indexed || set.changing) && len(set.done)-set.archIdx.len() > 32 {
		set.archIdx = indexArchive(set, set.archIdx)
	}
	return set.archIdx
}

func (set *Set) archivedTask(id string) *Task {
	if e := set.archived(id); e != nil {
		return set.task(e)
	}
	return nil
}

func (set *Set) hasArchivedChild(id string) bool {
	if len(set.done) == 0 {
		return false
	}
	x := set.archiveIndex()
	if x.hasChild(id) {
		return true
	}
	for i := x.len(); i < len(set.done); i++ {
		if ParentID(set.id(&set.done[i])) == id {
			return true
		}
	}
	return false
}

// findShadowed drops active lines whose task is already in the archive (a
// crash between the archive append and the rewrite): the archived copy is
// authoritative, and the next write removes the stale line.
func (set *Set) findShadowed() {
	if len(set.done) == 0 || len(set.active) == 0 {
		return
	}
	var drop map[string]bool
	for i := range set.done {
		id := set.id(&set.done[i])
		if j, ok := set.find(id); ok && !drop[id] {
			if drop == nil {
				drop = make(map[string]bool)
			}
			drop[id] = true
			e := set.active[j]
			set.shadowed = append(set.shadowed, e)
			set.warnings = append(set.warnings, fmt.Sprintf("%s:%d: task %s is already in %s (an interrupted completion?); the archived copy counts and this line is removed on the next write",
				set.activeName, e.line, id, set.doneName))
		}
	}
	if drop != nil {
		set.active = slices.DeleteFunc(set.active, func(e entry) bool { return drop[set.id(&e)] })
		set.changed = true
	}
}

// find locates id in the sorted active list.
func (set *Set) find(id string) (int, bool) {
	return slices.BinarySearchFunc(set.active, id, func(e entry, id string) int { return CompareIDs(set.id(&e), id) })
}

// check validates the tree structure of the active tasks (and, for tasks
// changed since load, their fields). It returns the problems and the ids
// of tasks that are ready to be archived: leaves marked complete, and
// containers whose subtasks are all archived.
func (set *Set) check(archivable []string) ([]Problem, []string) {
	return set.checkRange(0, len(set.active), archivable)
}

// checkRange is check of the tasks active[lo:hi], which must be whole
// trees under top-level tasks.
func (set *Set) checkRange(lo, hi int, archivable []string) ([]Problem, []string) {
	var probs []Problem
	prob := func(e *entry, format string, args ...any) {
		probs = append(probs, Problem{File: set.activeName, Line: int(e.line), ID: set.id(e), Msg: fmt.Sprintf(format, args...)})
	}
	var stack []int
	pop := func(end int) {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		e, desc := &set.active[i], end-i-1
		leaf, status := set.leaf(e), set.status(e)
		switch {
		case leaf && desc > 0:
			if e.flags&fLeafMissing != 0 {
				e.leaf = false
				if t := set.t(e); t != nil {
					t.Leaf = false
				}
				break
			}
			prob(e, `is a leaf ("leaf":true) but has subtasks (%s); set "leaf":false`, set.id(&set.active[i+1]))
		case !leaf && desc == 0:
			if status == StatusComplete || set.hasArchivedChild(set.id(e)) {
				archivable = append(archivable, set.id(e))
			} else {
				prob(e, `is a container ("leaf":false) but has no subtasks; set "leaf":true or add subtasks`)
			}
		case leaf && status == StatusComplete:
			archivable = append(archivable, set.id(e))
		case !leaf && status == StatusComplete:
			next := &set.active[i+1]
			prob(e, "is marked complete but its subtasks are not (%s is %s); complete them first", set.id(next), set.status(next))
		}
	}
	for i := lo; i < hi; i++ {
		e := &set.active[i]
		id := set.id(e)
		if t := set.t(e); t != nil && (t.line == 0 || t.dirty()) {
			for _, m := range fieldProblems(t) {
				prob(e, "%s", m)
			}
			if t.ID != id {
				prob(e, "changing a task's id (to %q) is not supported", t.ID)
			}
		}
		for len(stack) > 0 && !isAncestor(set.id(&set.active[stack[len(stack)-1]]), id) {
			pop(i)
		}
		if pid := ParentID(id); pid != "" {
			if len(stack) == 0 || set.id(&set.active[stack[len(stack)-1]]) != pid {
				if set.archived(pid) == nil {
					prob(e, "parent %s does not exist", pid)
				}
			}
		}
		stack = append(stack, i)
	}
	for len(stack) > 0 {
		pop(hi)
	}
	return probs, archivable
}

// Update runs fn on the current tasks under the file lock and writes the
// result: newly archived tasks are appended to tasks-done.jsonl first, then
// tasks.jsonl is replaced atomically (so a crash in between leaves a task
// in both files, which the next Load resolves in favour of the archive).
// Tasks marked "complete" by hand, and containers whose subtasks are all
// archived, are archived too. If fn or validation fails nothing is written.
func (s *Store) Update(fn func(*Set) error) error {
	return store.WithLock(s.LockPath, func() error { return s.UpdateLocked(fn) })
}

// UpdateLocked is Update for a caller that holds the store's lock
// (LockPath), to make the change together with others.
func (s *Store) UpdateLocked(fn func(*Set) error) error {
	snap, err := s.Load()
	if err != nil {
		return err
	}
	set := snap.forUpdate()
	if err := fn(set); err != nil {
		return err
	}
	return s.write(set)
}

// forUpdate returns a copy of set (a snapshot from Load) that Update may
// change without the change reaching the snapshot, which Load hands out
// again while the files are unchanged. A snapshot keeps no Tasks (see
// task), so the records are copied as they are: a few megabytes without
// a pointer for 100,000 tasks, a fraction of parsing the files again.
func (set *Set) forUpdate() *Set {
	c := *set
	c.indexed, c.notPending = false, nil // statuses may change
	c.active = slices.Clone(set.active)
	c.done = slices.Clone(set.done)
	c.shadowed = slices.Clone(set.shadowed)
	// c.archIdx stays: c.done starts as the same records, and c extends
	// its own copy of the index (see archiveIndex).
	c.archivedNow = nil
	c.warnings = slices.Clone(set.warnings)
	c.changing, c.tasks = true, nil
	return &c
}

// crashAfterArchive is a test hook run between the two writes of Update.
var crashAfterArchive func() error

func (s *Store) write(set *Set) error {
	now := set.now()
	held := s.Held()
	var probs []Problem
	for {
		var ready []string
		probs, ready = set.check(nil)
		ready = slices.DeleteFunc(ready, func(id string) bool {
			if !held[id] {
				return false
			}
			i, ok := set.find(id)
			return ok && set.leaf(&set.active[i])
		})
		if len(probs) > 0 || len(ready) == 0 {
			break
		}
		for _, id := range ready {
			if i, ok := set.find(id); ok {
				t := set.task(&set.active[i])
				set.archive(t, t.Commit, now)
			}
		}
	}
	if len(probs) > 0 {
		return &ValidationError{probs}
	}
	changed := set.changed
	size := 0
	for i := range set.active {
		e := &set.active[i]
		if !changed && set.needsWrite(e) {
			changed = true
		}
		size += int(e.n) + 1
	}
	if !changed && len(set.archivedNow) == 0 {
		return nil
	}
	if len(set.archivedNow) > 0 {
		var buf []byte
		for i, t := range set.archivedNow {
			if i > 0 {
				buf = append(buf, '\n')
			}
			buf = appendTask(buf, t)
		}
		if err := store.AppendLine(s.DonePath, buf); err != nil {
			return fmt.Errorf("append to %s: %w", s.DonePath, err)
		}
	}
	if crashAfterArchive != nil {
		if err := crashAfterArchive(); err != nil {
			return err
		}
	}
	out := make([]byte, 0, size+size/16+256)
	ends := make([]int, len(set.active)) // where each line ends in out
	for i := range set.active {
		e := &set.active[i]
		if set.needsWrite(e) {
			out = appendTask(out, set.task(e))
		} else {
			out = append(out, set.raw(e)...)
		}
		ends[i] = len(out)
		out = append(out, '\n')
	}
	s.forget() // until the new files are known in full
	if err := store.WriteFile(s.ActivePath, out, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", s.ActivePath, err)
	}
	markSorted(s.ActivePath)
	markValid(s.ActivePath)
	markArchive(s.ActivePath, s.DonePath) // both just checked together
	s.remember(set, out, ends)
	s.ownWrites()
	return nil
}

func (s *Store) forget() {
	s.cacheMu.Lock()
	s.cache, s.fresh = nil, 0
	s.cacheMu.Unlock()
}

// remember makes the Set just written the snapshot Load hands out while
// the files stay as written, so the Load after an Update needs no parse.
// Its records are made what a parse of the written lines makes them: each
// points at its line, takes its status and leaf from its Task, and drops
// the Task (read again from the line when asked for). A Set that carried
// warnings is left for a parse to judge. Called under the file lock.
func (s *Store) remember(set *Set, active []byte, ends []int) {
	if len(set.warnings) > 0 {
		return
	}
	done, err := readFile(s.DonePath)
	// The archive was as loaded (under the lock) and then appended to.
	if err != nil || !bytes.HasPrefix(done, set.doneData) || len(active) > 1<<32-1 || len(done) > 1<<32-1 {
		return
	}
	start := 0
	for i := range set.active {
		e := &set.active[i]
		t := set.t(e)
		if set.needsWrite(e) { // written by appendTask: {"id":"…",…
			e.status, e.leaf = statusCode(t.Status), t.Leaf
			e.idOff, e.idLen = uint32(start+len(`{"id":"`)), uint32(len(t.ID))
			e.flags &^= fLeafMissing | fStatusMissing | fIDAside
		} else if e.flags&fIDAside == 0 {
			if t != nil {
				e.status, e.leaf = statusCode(t.Status), t.Leaf
			}
			e.idOff = uint32(start) + e.idOff - e.off // where it was in the line
		}
		e.off, e.n, e.line, e.tk = uint32(start), uint32(ends[i]-start), int32(i+1), 0
		start = ends[i] + 1
	}
	// The archived tasks were appended as the file's last lines.
	n := len(set.archivedNow)
	lastLine := bytes.Count(done, []byte{'\n'})
	rest := done
	for k := n - 1; k >= 0; k-- {
		rest = bytes.TrimSuffix(rest, []byte{'\n'})
		line := rest[bytes.LastIndexByte(rest, '\n')+1:]
		rest = rest[:len(rest)-len(line)]
		e := &set.done[len(set.done)-n+k]
		e.off, e.n, e.line, e.tk = uint32(len(rest)), uint32(len(line)), int32(lastLine-n+k+1), 0
		e.idOff, e.idLen = e.off+uint32(len(`{"id":"`)), uint32(len(set.archivedNow[k].ID))
		e.flags &^= fIDAside
	}
	for i := range set.done[:len(set.done)-n] {
		set.done[i].tk = 0
	}
	set.data, set.doneData = active, done
	set.changing, set.tasks = false, nil
	set.gen, set.from = nextGen(), 0
	set.index()
	set.shadowed, set.archivedNow, set.changed = nil, nil, false
	s.cacheMu.Lock()
	s.cache = &loadCache{active: active, done: done, set: set}
	s.cacheMu.Unlock()
}

// Held returns the ids listed in the hold file (see Store.HoldPath).
func (s *Store) Held() map[string]bool {
	if s.HoldPath == "" {
		return nil
	}
	data, err := os.ReadFile(s.HoldPath)
	if err != nil {
		return nil
	}
	m := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			m[l] = true
		}
	}
	return m
}

// SetHold replaces the hold file with ids (removing it when there are
// none). Call it under no Update: it takes the lock itself.
func (s *Store) SetHold(ids ...string) error {
	return store.WithLock(s.LockPath, func() error {
		if len(ids) == 0 {
			err := os.Remove(s.HoldPath)
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		return store.WriteFile(s.HoldPath, []byte(strings.Join(ids, "\n")+"\n"), 0o644)
	})
}
