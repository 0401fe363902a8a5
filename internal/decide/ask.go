package decide

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
)

// ask holds an item whose iteration asked a person a question (`ralph
// ask`, which leaves the question in the item's ask file): the
// questions are recorded (engine.RecordQuestions), the item waits
// without spending an attempt, and its claim, if it made one, is not
// taken (the answer may change the work). Other items go on, unless the
// item left work in a tree they share: then the run waits with it.
type ask struct{}

// Turn claims nothing: an answered item's next iteration is a plain one
// whose prompt carries the answer.
func (ask) Turn(*engine.Item, engine.ItemState) (engine.Turn, bool, error) {
	return engine.Turn{}, false, nil
}

func (ask) Decide(ctx context.Context, x engine.View, v engine.Verdict) (engine.Decision, error) {
	f, p := x.Facts(), x.Paths()
	it := f.Item
	file := engine.AskFile(p.Dir, it.ID, f.Iteration)
	asked, err := engine.ReadAsked(file)
	if err != nil {
		return next, fmt.Errorf("reading %s's questions: %w", it.ID, err)
	}
	if len(asked) == 0 {
		return next, nil
	}
	holdsTree := false
	if f.Shared {
		commits := 0
		if f.BaseHead != "" {
			commits, _ = x.CommitsSince(ctx, f.BaseHead)
		}
		holdsTree = len(f.Files) > 0 || commits > 0
	}
	added, err := engine.RecordQuestions(p, x.RunID(), it.ID, f.Iteration, asked, holdsTree, x.Now())
	if err != nil {
		return next, fmt.Errorf("recording %s's questions: %w", it.ID, err)
	}
	_ = os.Remove(file)
	var ids, texts []string
	d := engine.Decision{Action: engine.Hold, Status: "waiting for an answer"}
	for _, q := range added {
		ids, texts = append(ids, q.ID), append(texts, q.Text)
		d.Events = append(d.Events, event(x, "question_asked",
			fmt.Sprintf("%s asks (%s): %s — answer with `ralph answer %s \"…\"`", it.ID, q.ID, oneLine(q.Text, 300), q.ID),
			map[string]any{"question": q.ID, "text": q.Text, "holds_tree": holdsTree}))
	}
	what := strings.Join(texts, " · ")
	if len(added) == 0 {
		what = "its questions of this iteration (recorded before a crash)"
	}
	d.Result = "waiting for an answer: " + oneLine(what, 200)
	d.Progress = "asked a person: " + oneLine(what, 300)
	d.Log = fmt.Sprintf("%s asked a person (%s) and waits for an answer; no attempt spent", it.ID, strings.Join(ids, ", "))
	if holdsTree {
		d.Log += "; its work stays in the work tree, so no other item starts until it is answered"
	}
	if v.Claimed {
		d.Log += "; its claim of done is judged again after the answer"
	}
	return d, nil
}
