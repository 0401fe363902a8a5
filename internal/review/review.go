// Package review is `ralph review`'s own logic: the prompt reviewers get
// for a branch's diff, the findings read out of what they answer, the
// report written to .ralph/reviews/<id>.md (and its .json for the
// dashboard), and the findings as PRD stories or tasks. Running the
// reviewers (agents, commands) is the CLI's.
package review

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/roles"
)

// Severities, most severe first.
var Severities = []string{"critical", "major", "minor", "nit"}

// Finding is one thing a reviewer found.
type Finding struct {
	Severity string `json:"severity"`        // critical | major | minor | nit
	Where    string `json:"where,omitempty"` // path or path:line
	Title    string `json:"title"`
	Detail   string `json:"detail,omitempty"`
	Reviewer string `json:"reviewer"`
}

// Reviewer is one reviewer's part of a review.
type Reviewer struct {
	Name  string `json:"name"` // the role, or "command N"
	Kind  string `json:"kind"` // role | command
	Agent string `json:"agent,omitempty"`
	Model string `json:"model,omitempty"`
	// Command is an external reviewer's command line.
	Command string `json:"command,omitempty"`
	// Verdict is approve, changes, or "" (none given).
	Verdict    string    `json:"verdict,omitempty"`
	Findings   []Finding `json:"findings"`
	Text       string    `json:"text"`                 // what it answered (masked)
	Transcript string    `json:"transcript,omitempty"` // relative to the repository
	Error      string    `json:"error,omitempty"`      // it failed: no findings from it
	Seconds    float64   `json:"seconds"`
}

// Report is one review, as .ralph/reviews/<id>.json has it.
type Report struct {
	ID        string     `json:"id"`
	CreatedAt time.Time  `json:"created_at"`
	Base      string     `json:"base"`     // as given (main, origin/main, a sha)
	BaseSHA   string     `json:"base_sha"` // the merge base reviewed against
	Head      string     `json:"head"`     // the branch (or HEAD when detached)
	HeadSHA   string     `json:"head_sha"`
	Commits   int        `json:"commits"`
	Files     []string   `json:"files"`
	Reviewers []Reviewer `json:"reviewers"`
	// Page is the report's markdown, relative to the repository
	// (.ralph/reviews/<id>.md).
	Page string `json:"markdown"`
	// PR is the pull request the review was posted to (0: none).
	PR int `json:"pr,omitempty"`
}

// Findings are every reviewer's findings, most severe first (stable).
func (r Report) Findings() []Finding {
	var all []Finding
	for _, rv := range r.Reviewers {
		all = append(all, rv.Findings...)
	}
	sort.SliceStable(all, func(i, j int) bool { return rank(all[i].Severity) < rank(all[j].Severity) })
	return all
}

// Verdict is the review's overall word: changes when a reviewer asked for
// them or found something critical or major, approve when every reviewer
// approved, else none.
func (r Report) Verdict() string {
	approved := len(r.Reviewers) > 0
	for _, rv := range r.Reviewers {
		if rv.Verdict == string(roles.Changes) {
			return "changes"
		}
		for _, f := range rv.Findings {
			if rank(f.Severity) <= 1 {
				return "changes"
			}
		}
		if rv.Verdict != string(roles.Approve) {
			approved = false
		}
	}
	if approved {
		return "approve"
	}
	return ""
}

func rank(sev string) int {
	for i, s := range Severities {
		if s == sev {
			return i
		}
	}
	return len(Severities)
}

var (
	// "- [major] path/to/file.go:42 — title: detail", the location and
	// the dash optional.
	findingLine = regexp.MustCompile(`(?i)^\s*(?:[-*+]|\d+[.)])\s+\[(critical|blocker|major|high|minor|medium|low|nit|nitpick|info)\]\s*(.*?)\s*$`)
	location    = regexp.MustCompile("^`?((?:[\\w.@+-]+/)*[\\w.@+-]+\\.[\\w]+(?::\\d+(?:-\\d+)?)?|(?:[\\w.@+-]+/)+[\\w.@+-]+(?::\\d+(?:-\\d+)?)?)`?\\s*(?:[—–:-]+\\s*)?(.*)$")
)

// severityOf maps the words reviewers use onto the four severities.
func severityOf(word string) string {
	switch strings.ToLower(word) {
	case "critical", "blocker":
		return "critical"
	case "major", "high":
		return "major"
	case "minor", "medium", "low":
		return "minor"
	}
	return "nit"
}

// ParseFindings reads the findings out of a reviewer's answer: one per
// list line that starts with a [severity] tag, its indented lines after
// it as its detail. Everything else (the summary, the verdict) is left.
func ParseFindings(text, reviewer string) []Finding {
	var out []Finding
	var cur *Finding
	for _, line := range strings.Split(text, "\n") {
		if m := findingLine.FindStringSubmatch(line); m != nil {
			out = append(out, Finding{Severity: severityOf(m[1]), Reviewer: reviewer})
			cur = &out[len(out)-1]
			rest := m[2]
			if l := location.FindStringSubmatch(rest); l != nil && strings.TrimSpace(l[2]) != "" {
				cur.Where, rest = l[1], l[2]
			}
			cur.Title = strings.TrimSpace(rest)
			if cur.Title == "" {
				cur.Title = "(no title)"
			}
			continue
		}
		if cur == nil {
			continue
		}
		if t := strings.TrimSpace(line); t != "" && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && !strings.HasPrefix(t, "REVIEW:") {
			if cur.Detail != "" {
				cur.Detail += "\n"
			}
			cur.Detail += t
			continue
		}
		cur = nil
	}
	return out
}

// maxDiff bounds the diff a prompt carries; beyond it the reviewers get
// the list of files and read the diff with git themselves.
const maxDiff = 200 << 10

// Prompt is a reviewer's prompt: its role's text, what to review and
// how to answer.
func Prompt(roleText, base, baseSHA, head, headSHA string, commits int, stat, diff string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(roleText))
	fmt.Fprintf(&b, `

---

## This review

You review the changes of %s (%s) since %s (merge base %s): %d commit(s). This is a review only: change no file and make no commit (you work in a scratch copy; nothing you write is kept). Read the code around the changes as you need.

Answer with your findings, each on one line that starts with its severity in brackets, then where, then what:

    - [critical] path/to/file.go:42 — what is wrong: why it matters and what to do
    - [major] path/to/other.go — …
    - [minor] …
    - [nit] …

(critical: wrong results, data loss, security; major: a bug or a missing test that matters; minor: should be fixed; nit: style.) Put more detail on indented lines under a finding. Then a short summary, and as your last line the verdict, exactly one of:

    REVIEW: approve
    REVIEW: changes

`, head, shortSHA(headSHA), base, shortSHA(baseSHA), commits)
	fmt.Fprintf(&b, "## Files changed\n\n```\n%s\n```\n", strings.TrimSpace(stat))
	if len(diff) > maxDiff {
		fmt.Fprintf(&b, "\nThe diff is %d KB, too long to give here: read it with `git diff %s %s` (file by file: `git diff %s %s -- PATH`).\n", len(diff)>>10, baseSHA, headSHA, baseSHA, headSHA)
	} else {
		fmt.Fprintf(&b, "\n## The diff (`git diff %s %s`)\n\n```diff\n%s\n```\n", shortSHA(baseSHA), shortSHA(headSHA), strings.TrimRight(diff, "\n"))
	}
	return b.String()
}

func shortSHA(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// Markdown is the report for people: the branch and base, the verdict,
// every finding (most severe first), then each reviewer's own words.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Review %s\n\n", r.ID)
	fmt.Fprintf(&b, "- **Branch:** %s (%s) against %s (merge base %s), %d commit(s), %d file(s)\n", r.Head, shortSHA(r.HeadSHA), r.Base, shortSHA(r.BaseSHA), r.Commits, len(r.Files))
	var names []string
	for _, rv := range r.Reviewers {
		n := rv.Name
		if rv.Agent != "" {
			n += " (" + rv.Agent
			if rv.Model != "" {
				n += ", " + rv.Model
			}
			n += ")"
		}
		names = append(names, n)
	}
	fmt.Fprintf(&b, "- **Reviewers:** %s\n", strings.Join(names, ", "))
	v := r.Verdict()
	if v == "" {
		v = "none (not every reviewer gave one)"
	}
	fmt.Fprintf(&b, "- **Verdict:** %s\n- **When:** %s\n", v, r.CreatedAt.UTC().Format(time.RFC3339))
	fs := r.Findings()
	fmt.Fprintf(&b, "\n## Findings (%d)\n\n", len(fs))
	if len(fs) == 0 {
		b.WriteString("None.\n")
	}
	for _, f := range fs {
		fmt.Fprintf(&b, "- **[%s]** ", f.Severity)
		if f.Where != "" {
			fmt.Fprintf(&b, "`%s` — ", f.Where)
		}
		fmt.Fprintf(&b, "%s _(%s)_\n", f.Title, f.Reviewer)
		for _, l := range strings.Split(f.Detail, "\n") {
			if l != "" {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
	}
	for _, rv := range r.Reviewers {
		fmt.Fprintf(&b, "\n## %s\n\n", rv.Name)
		if rv.Command != "" {
			fmt.Fprintf(&b, "Command: `%s`\n\n", rv.Command)
		}
		if rv.Error != "" {
			fmt.Fprintf(&b, "**Failed:** %s\n\n", rv.Error)
		}
		if rv.Verdict != "" {
			fmt.Fprintf(&b, "Verdict: %s\n\n", rv.Verdict)
		}
		if t := strings.TrimSpace(rv.Text); t != "" {
			fmt.Fprintf(&b, "%s\n", quote(t))
		}
		if rv.Transcript != "" {
			fmt.Fprintf(&b, "\nTranscript: %s\n", rv.Transcript)
		}
	}
	return b.String()
}

// quote renders text as a markdown quote.
func quote(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n")
}

// PRD is the findings (minor and above, unless all is set) as the stories
// of a PRD on branch, one story each, most severe first; gates are its
// quality checks. Nil when there is nothing to fix.
func (r Report) PRD(branch string, gates prd.QualityChecks, all bool) *prd.PRD {
	doc := &prd.PRD{Project: "review " + r.ID, Feature: "fixes from review " + r.ID, BranchName: branch, QualityChecks: gates,
		Description: fmt.Sprintf("The findings of `ralph review` %s of %s against %s.", r.ID, r.Head, r.Base)}
	for _, f := range r.Findings() {
		if f.Severity == "nit" && !all {
			continue
		}
		n := len(doc.Stories) + 1
		title := f.Title
		if len(title) > 100 {
			title = title[:100] + "…"
		}
		desc := fmt.Sprintf("Review %s (%s) found: [%s] %s", r.ID, f.Reviewer, f.Severity, f.Title)
		if f.Where != "" {
			desc += " — at " + f.Where
		}
		if f.Detail != "" {
			desc += "\n\n" + f.Detail
		}
		doc.Stories = append(doc.Stories, prd.Story{ID: fmt.Sprintf("R-%d", n), Title: title, Description: desc, Priority: n,
			AcceptanceCriteria: []string{"the finding is fixed: " + f.Title,
				"a test, in a new file, fails without the fix and passes with it", "the quality checks pass"}})
	}
	if len(doc.Stories) == 0 {
		return nil
	}
	return doc
}

// TaskTitle is a finding as one task's title.
func (f Finding) TaskTitle() string {
	t := "[" + f.Severity + "] "
	if f.Where != "" {
		t += f.Where + " — "
	}
	t += strings.Join(strings.Fields(f.Title), " ")
	if len(t) > 200 {
		t = t[:200] + "…"
	}
	return t
}
