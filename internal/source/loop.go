package source

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
)

// Loop is the plain Ralph loop of seed 001's ralph-loop plugin: one prompt,
// the same every iteration, until the agent's final message carries the
// completion promise (and optional checks pass) or the iterations run out.
// It owns no git history: the agent commits as its prompt tells it.
type Loop struct {
	Root          string
	Prompt        string
	Checks        []gate.Gate
	Gates         gate.Runner
	MaxIterations int
}

// LoopItemID is the one item of a plain loop.
const LoopItemID = "loop"

func (l *Loop) Kind() string { return "loop" }
func (l *Loop) Path() string { return filepath.Join(l.Root, ".ralph", "loop") }

func (l *Loop) Items() []engine.Item {
	title := strings.TrimSpace(l.Prompt)
	if i := strings.IndexByte(title, '\n'); i >= 0 {
		title = title[:i]
	}
	if len(title) > 60 {
		title = title[:60] + "…"
	}
	return []engine.Item{{ID: LoopItemID, Title: title, Kind: "loop"}}
}

func (l *Loop) Next(st *engine.State, busy map[string]bool) (*engine.Item, error) {
	is := st.Items[LoopItemID]
	if busy[LoopItemID] || (is != nil && (is.Status == engine.ItemPassed || is.Status == engine.ItemBlocked)) {
		return nil, nil
	}
	it := l.Items()[0]
	return &it, nil
}

func (l *Loop) Prepare(context.Context, *engine.Item, *engine.State) (string, error) {
	return l.Root, nil
}

func (l *Loop) Verify(ctx context.Context, a *engine.Attempt, st *engine.State) engine.Verdict {
	if a.Result.Failed() {
		return engine.AgentFailure(a.Result)
	}
	if !a.Claimed {
		// The same prompt comes back unchanged: no retry context.
		return engine.Verdict{Summary: fmt.Sprintf("no <promise>%s</promise> in the final message yet", a.Promise)}
	}
	if len(l.Checks) == 0 {
		return engine.Verdict{Passed: true, Claimed: true, Summary: "completion promise found"}
	}
	results, ok := l.Gates.Run(ctx, a.Dir, l.Checks, a.Log)
	v := engine.Verdict{Passed: ok, Claimed: true, Gates: results, Summary: "promise found; " + gate.Summary(results)}
	if !ok {
		v.Failure = "You claimed completion, but the harness's checks failed:\n\n" + gate.FailureContext(results, 4<<10)
	}
	return v
}

func (l *Loop) Accept(context.Context, *engine.Attempt, engine.Verdict, *engine.State) (string, error) {
	return "", nil
}

func (l *Loop) Block(context.Context, *engine.Item, *engine.State, string) error { return nil }

func (l *Loop) Recover(context.Context, *engine.Item, *engine.State) (string, bool, error) {
	return "", false, nil
}

func (l *Loop) PromptData(*engine.Item, *engine.PromptData) {}

// MaxAttempts lets the one item use every iteration of the loop, so the
// loop ends on max_iterations rather than on a blocked item.
func (l *Loop) MaxAttempts(string) int { return l.MaxIterations + 1 }

// LiteralTemplate escapes text so the prompt template prints it as is
// (a user's prompt may contain "{{").
func LiteralTemplate(text string) string {
	return strings.ReplaceAll(text, "{{", `{{"{{"}}`)
}
