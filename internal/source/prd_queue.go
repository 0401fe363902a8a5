package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/store"
)

// specQueue is a parallel run's speculative merge queue. A story whose
// claim is about to be judged joins it, and its gates run once, on the
// tree it will be committed as: the feature tip plus every story ahead of
// it in the queue (merged or still being judged) plus its own work. When
// its turn to merge comes and the stories ahead landed as judged, the
// feature branch moves to exactly that tree (the PRD's write-back aside,
// as in every ralph commit): no second gate run, and the gates of stories
// that finish together run together rather than one merge at a time.
//
// A story ahead that fails (its gates, a decider, its merge) leaves the
// queue; whatever was judged on top of it no longer matches the feature
// branch when its turn comes, and is merged the safe way instead: squash
// merge onto the real tip and the integrated gates again (Accept).
//
// The queue lives in memory. The only trace on disk is the marker of a
// story's work tree switched to its integrated tree while its gates run
// (speculating); a run killed meanwhile puts the story's own tree back
// before anything else reads the tree (unspeculate).
type specQueue struct {
	mu      sync.Mutex
	changed *sync.Cond
	entries []*queued         // in the order they joined; not landed, not dropped
	landed  map[string]string // a judged commit → the feature commit holding its tree
}

// queued is one story's place in the queue.
type queued struct {
	id     string
	parent string // the commit the story was judged on top of: a feature commit or the judged commit ahead
	judged string // a commit object (on parent) of the tree the gates judged
	tree   string // that tree
	own    string // the story's own tree (its work tree holds it after judging)
	// passed: the gates passed (until then the story is being judged);
	// arrived: its work is committed on its branch and it is about to take
	// its turn in the merge queue.
	passed, arrived bool
	since           time.Time // when it passed
}

// holdUp is how long a story waits for a story ahead that passed its gates
// but has not come to merge (a decider is still at it): after that it
// takes its turn anyway and, if need be, is merged the safe way.
const holdUp = 3 * time.Second

func newSpecQueue() *specQueue {
	q := &specQueue{landed: map[string]string{}}
	q.changed = sync.NewCond(&q.mu)
	return q
}

// end is the commit a story joining now is judged on top of: the judged
// commit of the last story in the queue, else tip. Called with q.mu held.
func (q *specQueue) end(tip string) string {
	// A story that passed but has not come to merge for holdUp is held by
	// a decider (or failed by one): nothing more is built on it.
	for i := len(q.entries) - 1; i >= 0; i-- {
		if e := q.entries[i]; e.passed && !e.arrived && time.Since(e.since) >= holdUp {
			q.entries = append(q.entries[:i:i], q.entries[i+1:]...)
		}
	}
	if n := len(q.entries); n > 0 {
		return q.entries[n-1].judged
	}
	return tip
}

// drop takes id out of the queue (its judgement failed or is stale) and
// reports whether it was there.
func (q *specQueue) drop(id string) bool { return q.leave(id) != nil }

// find is id's entry, or nil. Called with q.mu held.
func (q *specQueue) find(id string) *queued {
	for _, e := range q.entries {
		if e.id == id {
			return e
		}
	}
	return nil
}

// pass records that id's gates passed on the judged tree.
func (q *specQueue) pass(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e := q.find(id); e != nil {
		e.passed, e.since = true, time.Now()
		q.changed.Broadcast()
	}
}

// ownTree is the tree id's work tree holds when its verdict's tree is
// tree: its own work when the gates judged its integrated tree.
func (q *specQueue) ownTree(id, tree string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e := q.find(id); e != nil && e.tree == tree {
		return e.own
	}
	return tree
}

// waitTurn holds id back while a story ahead of it is still being judged,
// is on its way to merge, or passed but has not come to merge for less
// than holdUp (a decider is at it), so that the merges come in the order
// the stories were judged in, each on the one before (the merge queue
// itself is first come, first served). A story leaves the queue when its
// merge starts (leave).
func (q *specQueue) waitTurn(ctx context.Context, id string) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.changed.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.find(id)
	if e == nil {
		return // judged outside the queue: merged the safe way, in any order
	}
	e.arrived = true
	for ctx.Err() == nil {
		wait, until := false, time.Time{}
		for _, e := range q.entries {
			if e.id == id {
				break
			}
			switch {
			case !e.passed || e.arrived:
				wait = true
			case time.Since(e.since) < holdUp:
				wait = true
				if u := e.since.Add(holdUp); until.IsZero() || u.Before(until) {
					until = u
				}
			}
		}
		if !wait {
			return
		}
		if until.IsZero() {
			q.changed.Wait()
			continue
		}
		t := time.AfterFunc(time.Until(until), func() {
			q.mu.Lock()
			q.changed.Broadcast()
			q.mu.Unlock()
		})
		q.changed.Wait()
		t.Stop()
	}
}

// leave takes id out of the queue as its merge starts and returns its
// entry (nil if it was not in the queue).
func (q *specQueue) leave(id string) *queued {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.entries {
		if e.id == id {
			q.entries = append(q.entries[:i:i], q.entries[i+1:]...)
			q.changed.Broadcast()
			return e
		}
	}
	return nil
}

// fits reports whether the merge of e can be its judged tree itself: its
// gates passed on tree, on top of tip (or of a judged commit that landed
// as tip). If not, the safe way: squash merge and the integrated gates.
func (q *specQueue) fits(e *queued, tree, tip string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return e != nil && e.passed && e.tree == tree && (e.parent == tip || q.landed[e.parent] == tip)
}

// land records that the judged commit of e is now the feature commit sha.
func (q *specQueue) land(e *queued, sha string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.landed) >= 256 {
		q.landed = map[string]string{} // only the newest are built on
	}
	q.landed[e.judged] = sha
}

// judgeQueued judges a claimed story in the queue: it joins the queue's
// end; when stories are ahead of it (or merged since its tree was cut),
// its work is merged onto them (git merge-tree, no tree touched) and its
// work tree switched to that integrated tree for the gates, then back to
// its own work. ok is false when the story cannot be judged that way (its
// work does not merge cleanly on the stories ahead; the tree could not be
// switched): the caller judges it alone. A failure on a tree that holds a
// story not merged yet is not final either (the story ahead may be the
// cause): the story leaves the queue and is judged alone.
//
// alone, when set, is the verdict that already passed the story's own tree:
// if that is the tree to judge, it stands.
func (s *ParallelPRD) judgeQueued(ctx context.Context, wt *git.Repo, a *engine.Attempt, claimed bool, gates []gate.Gate, alone *engine.Verdict) (engine.Verdict, bool) {
	id := a.Item.ID
	own, err := snapshotTree(ctx, wt, nil)
	if err != nil {
		return engine.Verdict{}, false
	}
	head, err := wt.Head(ctx)
	if err != nil {
		return engine.Verdict{}, false
	}
	tip, err := s.featureTip(ctx)
	if err != nil {
		return engine.Verdict{}, false
	}
	// Joined under the queue's lock: a story joining next is judged on
	// top of this one's integrated tree.
	q := s.queue
	q.mu.Lock()
	parent := q.end(tip)
	e := &queued{id: id, parent: parent, own: own, tree: own}
	if head != parent {
		// Merged even when parent looks like the story's base: git finds
		// the merge base, and work cut at parent merges as itself. (A
		// tree whose HEAD is parent is that merge already.)
		work, err := wt.CommitTree(ctx, own, head, "ralph: work of "+id+" to integrate")
		var conflicted []string
		if err == nil {
			e.tree, conflicted, err = wt.MergeTrees(ctx, parent, work)
		}
		if err != nil || len(conflicted) > 0 {
			q.mu.Unlock()
			return engine.Verdict{}, false
		}
	}
	e.judged, err = wt.CommitTree(ctx, e.tree, parent, "ralph: "+id+" as judged")
	if err != nil {
		q.mu.Unlock()
		return engine.Verdict{}, false
	}
	q.entries = append(q.entries, e)
	q.changed.Broadcast()
	q.mu.Unlock()

	integrated := e.tree != own
	if !integrated && alone != nil && alone.Tree == own {
		q.pass(id)
		return *alone, true
	}
	if integrated {
		if err := s.speculate(ctx, wt, id, own, e.tree); err != nil {
			q.drop(id)
			return engine.Verdict{}, false
		}
		fmt.Fprintf(logOf(a), "ralph: judging %s on the feature branch with the stories ahead of it in the merge queue (tree %s)\n", id, short(e.tree))
	}
	// recheck: the integrated tree is committed from the main tree, so
	// the second snapshot is taken here, on the tree the gates judged.
	v := judgeTree(ctx, wt, nil, a, claimed, s.unclaimed(a), s.Gates, gates, !integrated)
	if integrated {
		if err := s.unspeculate(ctx, wt, id); err != nil {
			q.drop(id)
			return engine.Verdict{Claimed: true, Summary: "could not put the story's own tree back after the gates", Failure: err.Error()}, true
		}
	}
	if !v.Passed {
		q.drop(id)
		if integrated && parent != tip {
			return engine.Verdict{}, false // a story ahead, not merged yet, took part
		}
		if integrated {
			v.Summary = "integrated gates failed: " + v.Summary
			v.Failure = "Your work was judged merged onto the current feature branch (other stories merged since you started), and the gates failed there; bring your work in line with theirs.\n\n" + v.Failure
		}
		return v, true
	}
	if v.Tree != e.tree {
		q.drop(id) // the gates did not judge the tree the queue holds
		return engine.Verdict{}, false
	}
	q.pass(id)
	return v, true
}

// featureTip is the feature branch's head as this run last left it.
func (s *ParallelPRD) featureTip(ctx context.Context) (string, error) {
	s.wmu.Lock()
	tip := s.tip
	s.wmu.Unlock()
	if tip != "" {
		return tip, nil
	}
	return s.Git.RevParse(ctx, "refs/heads/"+s.Branch)
}

// speculatingPath marks a story's work tree switched to its integrated
// tree; it holds the story's own tree.
func (s *ParallelPRD) speculatingPath(id string) string {
	return filepath.Join(s.Git.Dir, ".ralph", "speculating", s.slug(id))
}

// speculate switches the story's work tree from its own tree to the
// integrated one, marking it first so a crash is undone (unspeculate).
func (s *ParallelPRD) speculate(ctx context.Context, wt *git.Repo, id, own, integrated string) error {
	p := s.speculatingPath(id)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := store.WriteFile(p, []byte(own+"\n"), 0o644); err != nil {
		return err
	}
	if err := wt.SwitchTree(ctx, own, integrated); err != nil {
		_ = s.unspeculate(ctx, wt, id)
		return err
	}
	return nil
}

// unspeculate puts a story's own tree back in its work tree if it was
// switched to an integrated tree (by this process's judging, or by one
// killed meanwhile), then forgets the mark. The own tree holds all the
// story's work (every file was staged before the switch).
func (s *ParallelPRD) unspeculate(ctx context.Context, wt *git.Repo, id string) error {
	p := s.speculatingPath(id)
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	own := strings.TrimSpace(string(b))
	if own != "" {
		if err := wt.ResetTree(ctx, own); err != nil {
			return err
		}
	}
	return os.Remove(p)
}
