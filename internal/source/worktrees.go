package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
)

// treeState is where a story worktree is in its life. Every worktree of a
// parallel run lives at its story's path (.ralph/worktrees/<slug>) and
// goes through these states; a tree moves to another story's path only
// from parked or ready, so a tree is never moved under a story at work.
//
//	(none) ─cut─▶ cutting ─▶ ready ──start──▶ running ─merged─▶ parked
//	                  └────────start─────────────▲                  │
//	ready, parked ─take─▶ taken ─moved─▶ (none)   (its tree becomes the
//	                                               taker's cutting tree)
//	cutting, ready, parked ─failed or run end─▶ (none)
//	taken ─not moved after all─▶ parked
type treeState string

const (
	treeNone    treeState = ""        // no tree at the story's path
	treeCutting treeState = "cutting" // being added, or moved there and switched
	treeReady   treeState = "ready"   // cut ahead for a story that has not started
	treeRunning treeState = "running" // its story's attempts work in it
	treeParked  treeState = "parked"  // its story merged; clean and free to take
	treeTaken   treeState = "taken"   // being moved to another story's path
)

// treeMoves are the transitions the lifecycle allows.
var treeMoves = map[treeState][]treeState{
	treeNone:    {treeCutting, treeRunning},
	treeCutting: {treeReady, treeRunning, treeNone},
	treeReady:   {treeRunning, treeTaken, treeParked, treeNone},
	treeRunning: {treeParked, treeNone},
	treeParked:  {treeTaken, treeRunning, treeNone},
	treeTaken:   {treeNone, treeParked},
}

// treeRecord is one line of .ralph/worktrees.jsonl: a story's tree moved
// from one state to another. A rerun reads the last state of each tree to
// repair what a crash left half-done (a tree still cutting or taken is
// half-made and removed; ready and parked trees are free to reuse).
type treeRecord struct {
	Time  string    `json:"time"`
	Story string    `json:"story"`
	From  treeState `json:"from"`
	To    treeState `json:"to"`
}

// treeTable is the one place a parallel run's worktrees change state. Its
// lock is never held across a git call: a transition claims a tree (to
// cutting or taken) first, the git work runs, and a second transition
// ends it. Waiters (a story whose tree is being cut by someone else) wait
// on the condition.
type treeTable struct {
	mu    sync.Mutex
	cond  sync.Cond
	trees map[string]treeState // by story id: the tree at that story's path
	log   string               // the transition log (see treeRecord)
	// logErr is the first failure to record a transition: the run goes on
	// (the lifecycle in memory is intact), the next start rebuilds the log.
	logErr error
}

func newTreeTable(log string) *treeTable {
	t := &treeTable{trees: map[string]treeState{}, log: log}
	t.cond.L = &t.mu
	return t
}

// errTreeBusy is a refused transition: the tree is not in a state the
// move starts from.
var errTreeBusy = errors.New("worktree busy")

// move changes story's tree from one of from to to, or refuses (the tree
// is elsewhere in its life).
func (t *treeTable) move(story string, to treeState, from ...treeState) error {
	t.mu.Lock()
	cur := t.trees[story]
	if !slices.Contains(from, cur) {
		t.mu.Unlock()
		return fmt.Errorf("%w: the tree of %s is %s, not %v", errTreeBusy, story, orNone(cur), from)
	}
	t.setLocked(story, cur, to)
	t.mu.Unlock()
	return nil
}

// setLocked records a transition the lifecycle allows; another is a bug
// in this file, and panics rather than lose a story's work.
func (t *treeTable) setLocked(story string, from, to treeState) {
	if !slices.Contains(treeMoves[from], to) {
		panic(fmt.Sprintf("worktree lifecycle: %s cannot go from %s to %s", story, orNone(from), orNone(to)))
	}
	if to == treeNone {
		delete(t.trees, story)
	} else {
		t.trees[story] = to
	}
	t.record(treeRecord{Story: story, From: from, To: to})
	t.cond.Broadcast()
}

func (t *treeTable) record(r treeRecord) {
	if t.log == "" {
		return
	}
	r.Time = time.Now().UTC().Format(time.RFC3339Nano)
	if err := store.AppendJSONL(t.log, r); err != nil && t.logErr == nil {
		t.logErr = err
	}
}

// state is story's tree's state now.
func (t *treeTable) state(story string) treeState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.trees[story]
}

// takeIdle claims a tree free to move to another path: a parked one
// first, else (unless parkedOnly) one ready for a story that has not
// started (that story's branch then holds only an old base: dropped
// reports it).
func (t *treeTable) takeIdle(parkedOnly bool) (story string, dropped bool) {
	t.mu.Lock()
	var parked, ready []string
	for id, st := range t.trees {
		switch st {
		case treeParked:
			parked = append(parked, id)
		case treeReady:
			ready = append(ready, id)
		}
	}
	var from treeState
	switch {
	case len(parked) > 0:
		sort.Strings(parked)
		story, from = parked[0], treeParked
	case len(ready) > 0 && !parkedOnly:
		sort.Strings(ready)
		story, from, dropped = ready[0], treeReady, true
	default:
		t.mu.Unlock()
		return "", false
	}
	t.setLocked(story, from, treeTaken)
	t.mu.Unlock()
	return story, dropped
}

// claimForStart decides how a starting story gets its tree, waiting while
// another goroutine cuts it or moves it away: ready (cut ahead: now
// running, to be brought to the tip), running (a retry or a resume:
// reattach), or none (the caller must cut one; the tree is now cutting,
// the caller's). A parked tree (a merged story started again, its passes
// reset by hand) is clean and on its branch: it is taken as ready.
func (t *treeTable) claimForStart(story string) treeState {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		cur := t.trees[story]
		switch cur {
		case treeCutting, treeTaken:
			t.cond.Wait()
			continue
		case treeReady, treeParked:
			t.setLocked(story, cur, treeRunning)
			return treeReady
		case treeRunning:
			return treeRunning
		default:
			t.setLocked(story, cur, treeCutting)
			return treeNone
		}
	}
}

// all lists the trees in state st.
func (t *treeTable) all(st treeState) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id, s := range t.trees {
		if s == st {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// loadTreeLog reads the last recorded state of each story's tree. A torn
// or unreadable line (a crash mid-append) ends the log: what came before
// it stands.
func loadTreeLog(path string) (map[string]treeState, error) {
	last := map[string]treeState{}
	err := store.ReadJSONL(path, func(_ int, raw []byte) error {
		var r treeRecord
		if json.Unmarshal(raw, &r) != nil {
			return nil
		}
		if r.To == treeNone {
			delete(last, r.Story)
		} else {
			last[r.Story] = r.To
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return last, nil
	}
	return last, err
}

// rewrite replaces the log with one line per tree as it stands (the
// lifecycle a rerun starts from), atomically.
func (t *treeTable) rewrite() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]string, 0, len(t.trees))
	for id := range t.trees {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b []byte
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for _, id := range ids {
		line, err := json.Marshal(treeRecord{Time: now, Story: id, From: treeNone, To: t.trees[id]})
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	t.logErr = nil
	return store.WriteFileNoSync(t.log, b, 0o600)
}

func orNone(s treeState) string {
	if s == treeNone {
		return "none"
	}
	return string(s)
}

// statDir reports whether dir holds a worktree (its .git file).
func statDir(dir string) bool {
	_, err := os.Lstat(dir + "/.git")
	return err == nil
}
