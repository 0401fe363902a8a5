package tasks

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
)

// Set is the content of both files. A Set from Load is the caller's own
// copy; inside Update, changes to it and to its Tasks are written.
type Set struct {
	activeName, doneName string
	active               []*Task          // tasks.jsonl, sorted by CompareIDs
	done                 []*Task          // the archive, in file order
	archived             map[string]*Task // id → its first line in the archive
	archivedKids         map[string]bool  // ids with an archived child
	shadowed             []*Task          // active lines whose task is already archived
	archivedNow          []*Task          // archived by this Update, to append
	changed              bool             // tasks added, removed or reordered since read
	warnings             []string
}

// Warnings are things Load skipped or will repair on the next Update: a
// torn last line of the archive, tasks left in both files by an
// interrupted completion.
func (s *Set) Warnings() []string { return s.warnings }

// ReadBoth reads tasks.jsonl and tasks-done.jsonl (nil for a missing file).
func (s *Store) ReadBoth() (active, done []byte, err error) {
	if active, err = readFile(s.ActivePath); err != nil {
		return nil, nil, err
	}
	if done, err = readFile(s.DonePath); err != nil {
		return nil, nil, err
	}
	return active, done, nil
}

func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// Load reads and validates both files. A missing file reads as empty.
// Anything invalid, a torn last line of tasks.jsonl (an append cut short)
// included, is a *ValidationError naming file:line for every problem.
func (s *Store) Load() (*Set, error) {
	active, done, err := s.ReadBoth()
	if err != nil {
		return nil, err
	}
	return s.LoadBytes(active, done)
}

// LoadBytes is Load of contents the caller has read (nil: a missing file).
func (s *Store) LoadBytes(active, done []byte) (*Set, error) {
	set := &Set{activeName: s.ActivePath, doneName: s.DonePath, archived: map[string]*Task{}, archivedKids: map[string]bool{}}
	probs := set.readActive(active)
	probs = set.readDone(done, probs)
	if len(probs) == 0 {
		set.dropShadowed()
		probs, _ = set.check()
	}
	if len(probs) > 0 {
		return nil, &ValidationError{probs}
	}
	return set, nil
}

func (set *Set) readActive(data []byte) []Problem {
	var probs []Problem
	seen := map[string]int{} // id → line
	eachLine(data, func(n int, line []byte, last bool) {
		t, err := parseLine(line)
		if err != nil {
			p := Problem{File: set.activeName, Line: n, Msg: err.Error()}
			var se *syntaxError
			switch {
			case errors.As(err, &se) && last:
				// Never dropped (its id would be handed out again): a
				// person finishes or deletes it.
				p.Msg = "the last line is cut short, a write to the file was interrupted (" + p.Msg + "): finish the line or delete it"
			case t != nil:
				p.ID = t.ID
			}
			probs = append(probs, p)
			return
		}
		t.line = n
		for _, m := range fieldProblems(t) {
			probs = append(probs, Problem{File: set.activeName, Line: n, ID: t.ID, Msg: m})
		}
		if first, dup := seen[t.ID]; dup {
			probs = append(probs, Problem{File: set.activeName, Line: n, ID: t.ID, Msg: fmt.Sprintf("duplicate id (also on line %d)", first)})
			return
		}
		seen[t.ID] = n
		set.active = append(set.active, t)
	})
	if !slices.IsSortedFunc(set.active, byID) {
		slices.SortStableFunc(set.active, byID)
		set.changed = true // written back sorted
	}
	return probs
}

func byID(a, b *Task) int { return CompareIDs(a.ID, b.ID) }

// readDone reads the archive: lines only need to be a readable task line
// (parseLine) with an id; the tree rules are for tasks.jsonl.
func (set *Set) readDone(data []byte, probs []Problem) []Problem {
	eachLine(data, func(n int, line []byte, last bool) {
		t, err := parseLine(line)
		var se *syntaxError
		switch {
		case errors.As(err, &se) && last:
			set.warnings = append(set.warnings, fmt.Sprintf("%s:%d: skipped torn last line (%s)", set.doneName, n, err))
			return
		case err != nil:
			p := Problem{File: set.doneName, Line: n, Msg: err.Error()}
			if t != nil {
				p.ID = t.ID
			}
			probs = append(probs, p)
			return
		case t.ID == "":
			probs = append(probs, Problem{File: set.doneName, Line: n, Msg: `missing "id"`})
			return
		}
		t.line, t.archived, t.Status = n, true, StatusComplete
		t.orig = t.core()
		set.addDone(t)
	})
	return probs
}

func (set *Set) addDone(t *Task) {
	set.done = append(set.done, t)
	if set.archived[t.ID] == nil {
		set.archived[t.ID] = t
	}
	set.archivedKids[ParentID(t.ID)] = true
}

// dropShadowed drops active lines whose task is already in the archive (a
// crash between the archive append and the rewrite): the archived copy is
// authoritative, and the next write removes the stale line.
func (set *Set) dropShadowed() {
	set.active = slices.DeleteFunc(set.active, func(t *Task) bool {
		if set.archived[t.ID] == nil {
			return false
		}
		set.shadowed = append(set.shadowed, t)
		set.warnings = append(set.warnings, fmt.Sprintf("%s:%d: task %s is already in %s (an interrupted completion?); the archived copy counts and this line is removed on the next write",
			set.activeName, t.line, t.ID, set.doneName))
		set.changed = true
		return true
	})
}

// find locates id in the sorted active list.
func (set *Set) find(id string) (int, bool) {
	return slices.BinarySearchFunc(set.active, id, func(t *Task, id string) int { return CompareIDs(t.ID, id) })
}

// check validates the tree structure of the active tasks (and, for tasks
// changed since read, their fields). It returns the problems and the ids
// of tasks that are ready to be archived: leaves marked complete, and
// containers whose subtasks are all archived.
func (set *Set) check() (probs []Problem, ready []string) {
	prob := func(t *Task, format string, args ...any) {
		probs = append(probs, Problem{File: set.activeName, Line: t.line, ID: t.ID, Msg: fmt.Sprintf(format, args...)})
	}
	var stack []int // indexes of the ancestors of the task at hand
	pop := func(end int) {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		t, desc := set.active[i], end-i-1
		switch {
		case t.Leaf && desc > 0:
			if t.noLeaf {
				t.Leaf = false
				break
			}
			prob(t, `is a leaf ("leaf":true) but has subtasks (%s); set "leaf":false`, set.active[i+1].ID)
		case !t.Leaf && desc == 0:
			if t.Status == StatusComplete || set.archivedKids[t.ID] {
				ready = append(ready, t.ID)
			} else {
				prob(t, `is a container ("leaf":false) but has no subtasks; set "leaf":true or add subtasks`)
			}
		case t.Leaf && t.Status == StatusComplete:
			ready = append(ready, t.ID)
		case !t.Leaf && t.Status == StatusComplete:
			next := set.active[i+1]
			prob(t, "is marked complete but its subtasks are not (%s is %s); complete them first", next.ID, next.Status)
		}
	}
	for i, t := range set.active {
		if t.raw == nil || t.dirty() {
			for _, m := range fieldProblems(t) {
				prob(t, "%s", m)
			}
			if t.raw != nil && t.ID != t.orig.ID {
				prob(t, "changing a task's id (to %q) is not supported", t.ID)
			}
		}
		for len(stack) > 0 && !isAncestor(set.active[stack[len(stack)-1]].ID, t.ID) {
			pop(i)
		}
		if pid := ParentID(t.ID); pid != "" && (len(stack) == 0 || set.active[stack[len(stack)-1]].ID != pid) && set.archived[pid] == nil {
			prob(t, "parent %s does not exist", pid)
		}
		stack = append(stack, i)
	}
	for len(stack) > 0 {
		pop(len(set.active))
	}
	return probs, ready
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
	set, err := s.Load()
	if err != nil {
		return err
	}
	if err := fn(set); err != nil {
		return err
	}
	return s.write(set)
}

// crashAfterArchive is a test hook run between the two writes of Update.
var crashAfterArchive func() error

func (s *Store) write(set *Set) error {
	now := s.now()
	held := s.Held()
	for {
		probs, ready := set.check()
		if len(probs) > 0 {
			return &ValidationError{probs}
		}
		// A held leaf's "complete" is the agent's claim: the loop archives it.
		ready = slices.DeleteFunc(ready, func(id string) bool {
			i, ok := set.find(id)
			return held[id] && ok && set.active[i].Leaf
		})
		if len(ready) == 0 {
			break
		}
		for _, id := range ready {
			if i, ok := set.find(id); ok {
				set.archive(set.active[i], set.active[i].Commit, now)
			}
		}
	}
	if !set.changed && !slices.ContainsFunc(set.active, (*Task).dirty) {
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
	var out []byte
	for _, t := range set.active {
		if t.dirty() {
			out = appendTask(out, t)
		} else {
			out = append(out, t.raw...)
		}
		out = append(out, '\n')
	}
	if err := store.WriteFile(s.ActivePath, out, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", s.ActivePath, err)
	}
	return nil
}

// Held returns the ids listed in the hold file (see Store.HoldPath).
func (s *Store) Held() map[string]bool {
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

// archive moves t from the active list to the archive. A Completed time
// already set (by an agent) is kept.
func (set *Set) archive(t *Task, commit string, now time.Time) {
	if i, ok := set.find(t.ID); ok && set.active[i] == t {
		set.active = slices.Delete(set.active, i, i+1)
	}
	t.Status = StatusComplete
	if t.Completed == "" {
		t.Completed = now.UTC().Format(time.RFC3339)
	}
	if commit != "" {
		t.Commit = commit
	}
	t.archived = true
	set.addDone(t)
	set.archivedNow = append(set.archivedNow, t)
	set.changed = true
}
