package source

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Loop is the plain Ralph loop (`while :; do cat PROMPT.md | claude;
// done`, as the Claude Code ralph-loop plugin runs it in a session through
// the Stop hook, or `ralph run --prompt FILE` as an external loop): one
// prompt, the same every iteration, until the agent's final message
// carries the completion promise (and the checks pass) or the iterations
// run out.
//
// Without Commit it records nothing of its own: what the agent changed is
// judged where it lies and left there. With Commit (`ralph run`, and an
// in-session loop by default), the loop works on the branch checked out
// when it starts: what each iteration leaves lands there, unverified, as
// the loop's memory, and the iteration that ends it is judged like any
// item and lands as exactly the tree judged, with the loop's trailers.
type Loop struct {
	Root          string
	Prompt        string
	Checks        []gate.Gate
	Gates         gate.Runner
	MaxIterations int
	// Git, when set, protects the files the checks run: they are compared
	// with the commit the loop began at (the item's base in state, so an
	// in-session loop driven by the Stop hook keeps it across calls).
	Git    *git.Repo
	Commit bool
	// With Commit: the branch the loop works on.
	branch string
}

// loopItemID is the one item of a plain loop.
const loopItemID = "loop"

// loopTrailer marks the commit that ended a plain loop (its promise
// verified); loopIterationTrailer the commits of its other iterations.
const (
	loopTrailer          = "Ralph-Loop"
	loopIterationTrailer = "Ralph-Loop-Iteration"
)

func (l *Loop) Info() engine.SourceInfo {
	info := engine.SourceInfo{Kind: "loop", Path: filepath.Join(l.Root, ".ralph", "loop"), ItemKind: "loop", Gated: len(l.Checks) > 0}
	for _, c := range l.Checks {
		if !slices.Contains(info.Commands, c.Command) {
			info.Commands = append(info.Commands, c.Command)
		}
	}
	return info
}

func (l *Loop) Items() []engine.Item {
	title := strings.TrimSpace(l.Prompt)
	if i := strings.IndexByte(title, '\n'); i >= 0 {
		title = title[:i]
	}
	if len(title) > 60 {
		title = title[:60] + "…"
	}
	// The one item may use every iteration of the loop, so the loop ends on
	// max_iterations rather than on a blocked item.
	return []engine.Item{{ID: loopItemID, Title: title, Kind: "loop", MaxAttempts: l.MaxIterations + 1}}
}

func (l *Loop) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	is := st.Items[loopItemID]
	if busy[loopItemID] || (is != nil && (is.Status == engine.ItemPassed || is.Status == engine.ItemBlocked)) {
		return nil, nil
	}
	it := l.Items()[0]
	return &it, nil
}

func (l *Loop) Prepare(ctx context.Context, _ *engine.Item, _ *engine.State) (engine.Workspace, error) {
	if !l.Commit {
		return engine.Workspace{Dir: l.Root}, nil
	}
	if l.branch == "" {
		// Once per run: the branch checked out now is the loop's.
		cur, err := l.Git.CurrentBranch(ctx)
		if err != nil {
			return engine.Workspace{}, err
		}
		if cur == "" || cur == "HEAD" {
			return engine.Workspace{}, usage.Errorf("the loop commits what each iteration leaves on the branch checked out, but HEAD is detached: check out a branch (or give --no-commit)")
		}
		if !l.Git.HasCommits(ctx) {
			return engine.Workspace{}, usage.Errorf("the repository has no commits yet: make a first commit so the loop can commit on %s", cur)
		}
		l.branch = cur
	}
	return engine.Workspace{Dir: l.Root, Follow: l.follow}, nil
}

// Terms: the loop's checks as its gates; with Commit, its branch, its
// trailers; no acceptance contract beyond them (the promise ends it): a
// claim needs real work since the loop started and green tests, not
// evidence.
func (l *Loop) Terms(it *engine.Item, st *engine.State) judge.Claim {
	c := judge.Claim{Gates: l.Checks, NoEvidence: true, Subject: "ralph loop: " + it.Title, Trailers: itemTrailers(loopTrailer, it.ID, st.RunID)}
	if l.Commit {
		c.Target = l.branch
	}
	return c
}

// Claim is the promise alone; the same prompt comes back unchanged when
// it is not there (no retry context).
func (l *Loop) Claim(ctx context.Context, a *engine.Attempt, st *engine.State) judge.Claim {
	c := l.Terms(a.Item, st)
	c.Body = a.Learnings
	c.Unclaimed = engine.Verdict{Summary: fmt.Sprintf("no <promise>%s</promise> in the final message yet", a.Promise)}
	if l.Commit {
		// Every iteration's work landed: this one's is built on the tip.
		c.Onto, _ = l.Git.Head(ctx)
		n := 0
		if cur := currentOf(st, a.Item.ID); cur != nil {
			n = cur.Iteration
		}
		c.KeepWork = commitMessage(fmt.Sprintf("ralph loop: iteration %d", n), a.Learnings, "",
			loopIterationTrailer+": "+strconv.Itoa(n), runTrailer+": "+st.RunID)
	}
	return c
}

// currentOf is the iteration under way on item id, or nil.
func currentOf(st *engine.State, id string) *engine.Current {
	for _, c := range st.Current {
		if c.Item == id {
			return c
		}
	}
	return nil
}

// follow brings the main tree along: what landed, with the index the
// work was recorded in.
func (l *Loop) follow(ctx context.Context, v engine.Verdict, old, landed string) error {
	return followTree(ctx, l.Git, v, landed)
}

// Landed has nothing to record: the loop is over.
func (l *Loop) Landed(context.Context, *engine.Attempt, engine.Verdict, string, *engine.State) error {
	return nil
}

func (l *Loop) Block(context.Context, *engine.Item, *engine.State, string) error { return nil }

// Recover finds the loop's last commit after a crash in its commit phase.
func (l *Loop) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if !l.Commit {
		return "", false, nil
	}
	if sha := committedIn(ctx, l.Git, "HEAD", loopTrailer, it.ID, st.RunID); sha != "" {
		return sha, true, nil
	}
	return "", false, nil
}

// Sync has nothing to do: the loop's one item changes only through the
// engine.
func (l *Loop) Sync(*engine.State, engine.SyncReason) error { return nil }

// Close has nothing to tidy.
func (l *Loop) Close(*engine.State) error { return nil }

// LiteralTemplate escapes text so the prompt template prints it as is
// (a user's prompt may contain "{{").
func LiteralTemplate(text string) string {
	return strings.ReplaceAll(text, "{{", `{{"{{"}}`)
}
