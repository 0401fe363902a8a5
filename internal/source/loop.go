package source

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
)

// Loop is the plain Ralph loop (as the Claude Code ralph-loop plugin runs
// it, driven by the Stop hook or `ralph run`): one prompt,
// the same every iteration, until the agent's final message carries the
// completion promise (and optional checks pass) or the iterations run out.
// It owns no git history: the agent commits as its prompt tells it.
type Loop struct {
	Root          string
	Prompt        string
	Checks        []gate.Gate
	Gates         gate.Runner
	MaxIterations int
	// Git, when set, protects the files the checks run: they are compared
	// with the commit the loop began at (the item's base in state, so an
	// in-session loop driven by the Stop hook keeps it across calls).
	Git   *git.Repo
	files gateFiles
}

// loopItemID is the one item of a plain loop.
const loopItemID = "loop"

func (l *Loop) Info() engine.SourceInfo {
	return engine.SourceInfo{Kind: "loop", Path: filepath.Join(l.Root, ".ralph", "loop"), ItemKind: "loop"}
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

func (l *Loop) Prepare(context.Context, *engine.Item, *engine.State) (engine.Workspace, error) {
	return engine.Workspace{Dir: l.Root}, nil
}

func (l *Loop) Verify(ctx context.Context, a *engine.Attempt, st *engine.State) engine.Verdict {
	// The same prompt comes back unchanged when nothing was claimed: no
	// retry context.
	var tampered []string
	if l.Git != nil && a.Claimed {
		var err error
		if tampered, err = l.files.check(ctx, l.Git.At(a.Dir), baseOf(st, a.Item.ID), l.Checks, false); err != nil {
			return engine.Verdict{Summary: "checking the checks' files failed", Failure: err.Error()}
		}
	}
	v := judge(ctx, a, a.Claimed, engine.Verdict{Summary: fmt.Sprintf("no <promise>%s</promise> in the final message yet", a.Promise)}, l.Gates, l.Checks)
	v.Tampered = append(tampered, v.Tampered...)
	return v
}

func (l *Loop) Accept(context.Context, *engine.Attempt, engine.Verdict, *engine.State) (string, error) {
	return "", nil
}

func (l *Loop) Block(context.Context, *engine.Item, *engine.State, string) error { return nil }

func (l *Loop) Recover(context.Context, *engine.Item, *engine.State) (string, bool, error) {
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
