package github

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/store"
)

// PullRequestOptions say where a run's pull request goes.
type PullRequestOptions struct {
	GH     *GH
	Git    *git.Repo
	Remote string // the remote the feature branch is pushed to (origin)
	Record string // the record file (RecordFile in .ralph)
	Title  string
	Mask   func(string) string
}

// UpdatePullRequest pushes the run's feature branch and opens its pull
// request, or updates the one open from that branch: the body lists each
// item with its commit, verification and cost; it is a draft while any
// item is blocked or pending and ready for review once all passed. It
// returns the pull request's URL.
func UpdatePullRequest(ctx context.Context, o PullRequestOptions, st *engine.State) (string, error) {
	if st == nil || st.Branch == "" {
		return "", fmt.Errorf("the run has no feature branch to open a pull request from")
	}
	rec, err := LoadRecord(o.Record)
	if err != nil {
		return "", fmt.Errorf("%s: %w", o.Record, err)
	}
	// What earlier runs passed on this branch, and this run has not.
	earlier := map[string]PRItem{}
	if rec.PR != nil && rec.PR.Branch == st.Branch {
		for id, row := range rec.PR.Passed {
			if st.Items[id] == nil {
				earlier[id] = row
			}
		}
	}
	if err := o.Git.Push(ctx, o.Remote, "refs/heads/"+st.Branch, "refs/heads/"+st.Branch); err != nil {
		return "", fmt.Errorf("pushing %s to %s: %w", st.Branch, o.Remote, err)
	}
	passed, _, total := st.Counts()
	draft := passed < total || total == 0
	body := o.Mask(PullRequestBody(st, earlier))
	title := o.Mask(oneLine(o.Title))
	pr, err := o.GH.FindPR(ctx, st.Branch)
	if err != nil {
		return "", err
	}
	var url string
	var number int
	if pr == nil {
		base := st.BaseBranch
		if base == st.Branch {
			base = ""
		}
		if url, err = o.GH.CreatePR(ctx, st.Branch, base, title, body, draft); err != nil {
			return "", err
		}
		// gh prints the URL; the number is asked once, for the record.
		if pr, err = o.GH.FindPR(ctx, st.Branch); err != nil || pr == nil {
			return url, err
		}
		number = pr.Number
	} else {
		number, url = pr.Number, pr.URL
		if err := o.GH.EditPR(ctx, number, title, body); err != nil {
			return url, err
		}
		if pr.IsDraft != draft {
			if err := o.GH.SetDraft(ctx, number, draft); err != nil {
				return url, err
			}
		}
	}
	for _, id := range st.Order {
		if row, ok := passedRow(st, id); ok {
			earlier[id] = row
		}
	}
	rec.PR = &PRRecord{Number: number, URL: url, Branch: st.Branch, Draft: draft, Passed: earlier}
	return url, store.WriteJSON(o.Record, rec)
}

// passedRow is item id's row when it passed in this run with a commit of
// its own.
func passedRow(st *engine.State, id string) (PRItem, bool) {
	is := st.Items[id]
	if is == nil || is.Status != engine.ItemPassed || is.Commit == "" {
		return PRItem{}, false
	}
	return PRItem{Title: is.Title, Commit: short(is.Commit), Verified: verification(is), Cost: cost(is), Run: st.RunID}, true
}

// PullRequestBody lists a run's items: status, commit, verification,
// cost; then the items earlier runs passed on the branch.
func PullRequestBody(st *engine.State, earlier map[string]PRItem) string {
	var b strings.Builder
	passed, blocked, total := st.Counts()
	fmt.Fprintf(&b, "Made by ralph, run %s: %d of %s passed", st.RunID, passed, engine.Plural(total, "item"))
	if blocked > 0 {
		fmt.Fprintf(&b, ", %d blocked", blocked)
	}
	b.WriteString(".\n\n| item | status | commit | verified by ralph | cost |\n|---|---|---|---|---|\n")
	for _, id := range st.Order {
		is := st.Items[id]
		if is == nil {
			continue
		}
		commit, verified := "", ""
		switch is.Status {
		case engine.ItemPassed:
			commit, verified = short(is.Commit), verification(is)
			if is.Commit == "" {
				verified = "passed before the run"
			}
		case engine.ItemBlocked:
			verified = "blocked: " + oneLine(is.Reason)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(itemTitle(id, is.Title)), is.Status, commit, cell(verified), cost(is))
	}
	if st.Untracked > 0 {
		fmt.Fprintf(&b, "\n… and %d more not started yet.\n", st.Untracked)
	}
	if len(earlier) > 0 {
		fmt.Fprintf(&b, "\nPassed in earlier runs on this branch:\n\n| item | run | commit | verified by ralph | cost |\n|---|---|---|---|---|\n")
		for _, id := range slices.Sorted(maps.Keys(earlier)) {
			row := earlier[id]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(itemTitle(id, row.Title)), row.Run, row.Commit, cell(row.Verified), row.Cost)
		}
	}
	if st.Usage.CostUSD > 0 {
		fmt.Fprintf(&b, "\nTotal agent cost: $%.4f.\n", st.Usage.CostUSD)
	}
	return b.String()
}

// itemTitle is an item's name in a table: its id, then its title.
func itemTitle(id, title string) string {
	if title == "" {
		return id
	}
	return id + " " + title
}

// cell keeps a text inside its table cell.
func cell(s string) string {
	s = oneLine(s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func short(sha string) string {
	if len(sha) > 10 {
		return sha[:10]
	}
	return sha
}
