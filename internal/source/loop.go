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
	"github.com/ralph-loop/ralph/internal/usage"
)

// Loop is the plain Ralph loop (`while :; do cat PROMPT.md | claude;
// done`, as the Claude Code ralph-loop plugin runs it in a session through
// the Stop hook, or `ralph run --prompt FILE` as an external loop): one
// prompt, the same every iteration, until the agent's final message
// carries the completion promise (and the checks pass) or the iterations
// run out.
//
// In a session it owns no git history: the agent commits as its prompt
// tells it. With Commit (`ralph run`), the loop works on the branch
// checked out when it starts and commits what each iteration left; the
// iteration that ends it is judged on a snapshot of the tree
// (judgeTree) and committed as exactly that tree, with the loop's
// trailers, like any item.
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
	files  gateFiles
	// With Commit: the branch the loop works on, and what ralph knows of
	// it (the guard of every main-tree source).
	branch  string
	guard   branchGuard
	outputs gateOutputs
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
		head, err := l.Git.Head(ctx)
		if err != nil {
			return engine.Workspace{}, err
		}
		l.branch = cur
		l.guard.recordTip(head)
	}
	return engine.Workspace{Dir: l.Root, Base: l.guard.known("")}, nil
}

func (l *Loop) Verify(ctx context.Context, a *engine.Attempt, st *engine.State) engine.Verdict {
	// The same prompt comes back unchanged when nothing was claimed: no
	// retry context.
	unclaimed := engine.Verdict{Summary: fmt.Sprintf("no <promise>%s</promise> in the final message yet", a.Promise)}
	var tampered []string
	repo := l.Git
	if l.Commit {
		repo = l.Git.At(a.Dir)
		t, err := l.guard.check(ctx, repo, l.branch, baseOf(st, a.Item.ID), a.Item.ID, st.RunID, st.Preexisting)
		if err != nil {
			return engine.Verdict{Summary: "checking the branch failed", Failure: err.Error()}
		}
		if t != nil {
			return engine.Verdict{Claimed: a.Claimed, Tampered: []string{t.report}, Summary: "tampering: " + t.report, Failure: t.failure}
		}
	}
	if l.Git != nil && a.Claimed {
		var err error
		if tampered, err = l.files.check(ctx, l.Git.At(a.Dir), baseOf(st, a.Item.ID), l.Checks, false); err != nil {
			return engine.Verdict{Summary: "checking the checks' files failed", Failure: err.Error()}
		}
	}
	var v engine.Verdict
	if l.Commit {
		ctx = withJudging(ctx, judging{base: l.guard.known(baseOf(st, a.Item.ID)), since: st.EnvSince(), outputs: &l.outputs})
		v = judgeTree(ctx, repo, st.Preexisting, a, a.Claimed, unclaimed, l.Gates, l.Checks, true)
		v = l.guard.settle(ctx, repo, a, v, st.Preexisting)
		if !v.Passed && len(tampered) == 0 {
			// What the iteration left is committed whatever the verdict:
			// the next fresh agent finds it in git, as the loop's memory.
			n := 0
			if cur := currentOf(st, a.Item.ID); cur != nil {
				n = cur.Iteration
			}
			msg := commitMessage(fmt.Sprintf("ralph loop: iteration %d", n), a.Learnings, "",
				loopIterationTrailer+": "+strconv.Itoa(n), runTrailer+": "+st.RunID)
			sha, _, err := commitWork(ctx, repo, "", st.Preexisting, msg, false)
			if err != nil {
				return engine.Verdict{Summary: "committing the iteration's work failed", Failure: err.Error()}
			}
			l.guard.recordTip(sha)
		}
	} else {
		v = judge(ctx, a, a.Claimed, unclaimed, l.Gates, l.Checks)
	}
	v.Tampered = append(tampered, v.Tampered...)
	return v
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

// Accept commits the verified tree (with Commit): the guard runs again,
// the tree must still be the one the checks ran on, and it becomes one
// commit on top of whatever the agent committed itself in the iteration.
func (l *Loop) Accept(ctx context.Context, a *engine.Attempt, v engine.Verdict, st *engine.State) (string, error) {
	if !l.Commit {
		return "", nil
	}
	repo := l.Git.At(a.Dir)
	t, err := l.guard.check(ctx, repo, l.branch, baseOf(st, a.Item.ID), a.Item.ID, st.RunID, st.Preexisting)
	if err != nil {
		return "", err
	}
	if t != nil {
		return "", &engine.Rejected{Summary: "tampering after the verdict: " + t.report, Failure: t.failure}
	}
	if v.Tree != "" {
		tree, err := snapshotTree(ctx, repo, st.Preexisting)
		if err != nil {
			return "", err
		}
		if tree != v.Tree {
			return "", treeChanged(ctx, repo, v.Tree, tree)
		}
	}
	msg := commitMessage("ralph loop: "+a.Item.Title, a.Learnings, v.Summary, itemTrailers(loopTrailer, a.Item.ID, st.RunID)...)
	var sha string
	if v.Tree != "" {
		sha, err = repo.CommitInclude(ctx, msg, true)
	} else {
		sha, _, err = commitWork(ctx, repo, "", st.Preexisting, msg, true)
	}
	if err != nil {
		return "", err
	}
	l.guard.recordTip(sha)
	return sha, nil
}

func (l *Loop) Block(context.Context, *engine.Item, *engine.State, string) error { return nil }

// Recover finds the loop's last commit after a crash in its commit phase.
func (l *Loop) Recover(ctx context.Context, it *engine.Item, st *engine.State) (string, bool, error) {
	if !l.Commit {
		return "", false, nil
	}
	if sha := committedIn(ctx, l.Git, "HEAD", loopTrailer, it.ID, st.RunID); sha != "" {
		l.guard.recordTip(sha)
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
