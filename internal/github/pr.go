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
	pr, err := o.GH.FindPR(ctx, st.Branch)
	if err != nil {
		return "", err
	}
	if pr == nil && len(earlier) == 0 && !slices.ContainsFunc(st.Order, func(id string) bool { _, ok := passedRow(st, id); return ok }) {
		// No item landed a commit on the branch (every one blocked): it
		// is its base, and GitHub refuses a pull request without a
		// commit. None is asked for.
		return "", fmt.Errorf("not opened: no item passed, so %s holds no commit of this work yet, and GitHub opens no pull request without one; the next run that passes an item opens it", st.Branch)
	}
	if err := o.Git.Push(ctx, o.Remote, "refs/heads/"+st.Branch, "refs/heads/"+st.Branch); err != nil {
		return "", fmt.Errorf("pushing %s to %s: %w", st.Branch, o.Remote, err)
	}
	passed, _, total := st.Counts()
	draft := passed < total || total == 0
	body := o.Mask(PullRequestBody(st, earlier))
	title := o.Title
	if t := IssuesTitle(st, earlier); t != "" {
		title = t // the issues' own titles, not the search that found them
	}
	title = o.Mask(oneLine(title))
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
	fmt.Fprintf(&b, "Made by ralph, run %s: %d of %s passed%s", st.RunID, passed, engine.Plural(total, "item"), engine.MarkedCount(len(st.Marked())))
	if blocked > 0 {
		fmt.Fprintf(&b, ", %d blocked", blocked)
	}
	b.WriteString(".\n\n")
	if links := issueLinks(st, earlier); links != "" {
		b.WriteString(links + "\n")
	}
	b.WriteString("| item | status | commit | verified by ralph | cost |\n|---|---|---|---|---|\n")
	for _, id := range st.Order {
		is := st.Items[id]
		if is == nil {
			continue
		}
		commit, verified := "", ""
		switch is.Status {
		case engine.ItemPassed:
			commit, verified = short(is.Commit), verification(is)
			switch {
			case is.Reason == engine.TrustedReason:
				verified = "no: marked done by hand, counted as passed because the run trusts marks (--trust-marks)"
			case is.Commit == "":
				verified = "passed before the run"
			}
		case engine.ItemBlocked:
			verified = "blocked: " + oneLine(is.Reason)
		case engine.ItemMarked:
			verified = "no: " + engine.MarkedLabel + " (" + oneLine(is.Reason) + ")"
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

// issueLinks are the lines that link the pull request to the issues its
// items came from: "Closes #N" for each one that passed (GitHub closes it
// when the pull request merges), "Refs #N" for the others.
func issueLinks(st *engine.State, earlier map[string]PRItem) string {
	var closes, refs []string
	seen := map[int]bool{}
	for _, id := range append(slices.Clone(st.Order), slices.Sorted(maps.Keys(earlier))...) {
		n := IssueNumber(id)
		if n == 0 || seen[n] {
			continue
		}
		seen[n] = true
		_, before := earlier[id]
		if is := st.Items[id]; before || (is != nil && is.Status == engine.ItemPassed) {
			closes = append(closes, fmt.Sprintf("Closes #%d", n))
		} else {
			refs = append(refs, fmt.Sprintf("Refs #%d (not passed yet)", n))
		}
	}
	if len(closes)+len(refs) == 0 {
		return ""
	}
	return strings.Join(append(closes, refs...), "\n") + "\n"
}

// IssuesTitle is the title of an issue run's pull request ("" for a run
// of no issue): the one issue's title and number, or the issues' numbers
// and titles (this run's and those earlier runs passed on the branch),
// cut to a line.
func IssuesTitle(st *engine.State, earlier map[string]PRItem) string {
	var nums, titles []string
	add := func(id, title string) {
		n := IssueNumber(id)
		if n == 0 || slices.Contains(nums, fmt.Sprintf("#%d", n)) {
			return
		}
		nums = append(nums, fmt.Sprintf("#%d", n))
		titles = append(titles, strings.TrimSpace(strings.TrimSuffix(title, fmt.Sprintf("(#%d)", n))))
	}
	for _, id := range slices.Sorted(maps.Keys(earlier)) {
		add(id, earlier[id].Title)
	}
	for _, id := range st.Order {
		if is := st.Items[id]; is != nil {
			add(id, is.Title)
		}
	}
	switch len(nums) {
	case 0:
		return ""
	case 1:
		return titles[0] + " (" + nums[0] + ")"
	}
	t := "Issues " + strings.Join(nums[:len(nums)-1], ", ") + " and " + nums[len(nums)-1] + ": " + strings.Join(titles, "; ")
	if r := []rune(t); len(r) > 100 {
		t = string(r[:99]) + "…"
	}
	return t
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
