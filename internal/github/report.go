package github

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/store"
)

// RecordFile is where ralph keeps what it told GitHub, in .ralph/.
const RecordFile = "github.json"

// Record is what ralph posted: each report once, even across a crash.
type Record struct {
	// Posts by key (passed:ID:COMMIT, blocked:ID:RUNS): a report is
	// "pending" from just before gh is asked to post it until it is
	// "posted"; a pending one found after a crash is looked for among the
	// issue's comments (by its marker) before it is posted again.
	Posts map[string]*Post `json:"posts"`
	// PR is the run's pull request, once opened.
	PR *PRRecord `json:"pr,omitempty"`
}

// Post is one report on an issue.
type Post struct {
	Issue  int       `json:"issue"`
	State  string    `json:"state"` // pending | posted
	Closed bool      `json:"closed,omitempty"`
	At     time.Time `json:"at"`
}

// PRRecord is the run's pull request.
type PRRecord struct {
	Number int    `json:"number"`
	URL    string `json:"url"`
	Branch string `json:"branch"`
	Draft  bool   `json:"draft"`
	// Passed are the items that passed on the branch, by id, in every run
	// that updated the pull request: a --fresh run's body still lists the
	// work earlier runs landed there.
	Passed map[string]PRItem `json:"passed,omitempty"`
}

// PRItem is one passed item's row in a pull request's body.
type PRItem struct {
	Title    string `json:"title"`
	Commit   string `json:"commit"`
	Verified string `json:"verified"`
	Cost     string `json:"cost,omitempty"`
	Run      string `json:"run"`
}

// LoadRecord reads path (a missing file is an empty record).
func LoadRecord(path string) (*Record, error) {
	r := &Record{}
	if err := store.ReadJSON(path, r); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if r.Posts == nil {
		r.Posts = map[string]*Post{}
	}
	return r, nil
}

// Reporter reports an issue run's verdicts on the issues: a comment with
// the commit and what was verified on a pass (and the issue closed when
// Close), a comment with the reason on a block. It reads the verdicts
// from the state the engine saved, after it saved them: a report never
// runs ahead of what the run recorded, and one a crash cut off is made by
// the next Report.
type Reporter struct {
	GH     *GH
	Record string // path of the record (RecordFile in .ralph)
	Close  bool
	// Mask hides secrets in what is posted.
	Mask func(string) string
	// Logf tells the user about a report that failed (never fatal: the
	// next Report tries again).
	Logf func(format string, args ...any)

	mu sync.Mutex
}

// Report posts what st holds and no report was posted for yet.
func (r *Reporter) Report(ctx context.Context, st *engine.State) {
	if st == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, err := LoadRecord(r.Record)
	if err != nil {
		r.Logf("github: %s is unreadable (%v); nothing is posted until it is fixed or removed", r.Record, err)
		return
	}
	for _, id := range st.Order {
		is := st.Items[id]
		n := IssueNumber(id)
		if is == nil || n == 0 {
			continue
		}
		var key, body string
		switch is.Status {
		case engine.ItemPassed:
			if is.Commit == "" {
				continue // passed before the run (nothing of ralph's to report)
			}
			key = "passed:" + id + ":" + is.Commit
			body = passedComment(st, is)
		case engine.ItemBlocked:
			key = fmt.Sprintf("blocked:%s:%d", id, is.Runs)
			body = blockedComment(st, is)
		default:
			continue
		}
		if err := r.post(ctx, rec, key, n, r.Mask(body), is.Status == engine.ItemPassed && r.Close); err != nil {
			r.Logf("github: reporting on issue #%d: %v (tried again at the next report)", n, err)
		}
	}
}

// post makes one report exactly once: recorded pending before gh posts
// it, posted after; a pending one is first looked for on the issue.
func (r *Reporter) post(ctx context.Context, rec *Record, key string, n int, body string, close bool) error {
	p := rec.Posts[key]
	marker := "<!-- ralph:" + key + " -->"
	if p == nil || p.State != "posted" {
		already := false
		if p != nil {
			// A crash may have come between gh's post and the record.
			found, err := r.GH.Commented(ctx, n, marker)
			if err != nil {
				return err
			}
			already = found
		} else {
			p = &Post{Issue: n, State: "pending", At: time.Now().UTC()}
			rec.Posts[key] = p
			if err := store.WriteJSON(r.Record, rec); err != nil {
				return err
			}
		}
		if !already {
			if err := r.GH.Comment(ctx, n, body+"\n\n"+marker); err != nil {
				return err
			}
		}
		p.State = "posted"
		if err := store.WriteJSON(r.Record, rec); err != nil {
			return err
		}
	}
	if close && !p.Closed {
		if err := r.GH.Close(ctx, n); err != nil {
			return err
		}
		p.Closed = true
		return store.WriteJSON(r.Record, rec)
	}
	return nil
}

func passedComment(st *engine.State, is *engine.ItemState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ralph verified this issue in commit %s on branch `%s` (run %s).\n\n", is.Commit, st.Branch, st.RunID)
	if v := verification(is); v != "" {
		fmt.Fprintf(&b, "- Verified by ralph: %s\n", v)
	}
	if c := cost(is); c != "" {
		fmt.Fprintf(&b, "- Agent cost: %s\n", c)
	}
	fmt.Fprintf(&b, "- Iterations: %d\n", max(1, len(is.Iterations)))
	return b.String()
}

func blockedComment(st *engine.State, is *engine.ItemState) string {
	reason := is.Reason
	if reason == "" {
		reason = "no reason recorded"
	}
	return fmt.Sprintf("ralph could not finish this issue (run %s): it is blocked after %s.\n\nReason: %s\n\nIts work, if any, is kept on a `ralph/blocked/…` branch.",
		st.RunID, engine.Plural(is.Attempts, "attempt"), oneLine(reason))
}

// verification is what the gates said when the item passed.
func verification(is *engine.ItemState) string {
	return oneLine(is.LastResult)
}

// cost is what the agents spent on the item ("" when they reported
// nothing).
func cost(is *engine.ItemState) string {
	if is.Usage == nil {
		return ""
	}
	u := is.Usage
	switch {
	case u.CostUSD > 0:
		return fmt.Sprintf("$%.4f (%d tokens)", u.CostUSD, u.InputTokens+u.OutputTokens)
	case u.InputTokens+u.OutputTokens > 0:
		return fmt.Sprintf("%d tokens", u.InputTokens+u.OutputTokens)
	}
	return ""
}
