package github

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ralph-loop/ralph/internal/prd"
)

// idPrefix names an issue's story: issue-12.
const idPrefix = "issue-"

// StoryID is the story an issue becomes.
func StoryID(n int) string { return idPrefix + strconv.Itoa(n) }

// IssueNumber is the issue a story came from (0: not an issue's).
func IssueNumber(storyID string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(storyID, idPrefix))
	if err != nil || !strings.HasPrefix(storyID, idPrefix) {
		return 0
	}
	return n
}

func sortIssues(list []Issue) {
	sort.Slice(list, func(i, j int) bool { return list[i].Number < list[j].Number })
}

var (
	// dependsOn finds "depends on #12", "depends on #3, #4 and #5",
	// "Depends-On: #7" in an issue's body.
	dependsOn = regexp.MustCompile(`(?i)depends[ -]on:?((?:[\s,]*(?:and\s+)?#\d+)+)`)
	issueRef  = regexp.MustCompile(`#(\d+)`)
	// taskLine is a task-list line: "- [ ] text" or "* [x] text".
	taskLine = regexp.MustCompile(`^\s*[-*+]\s+\[([ xX])\]\s+(.+?)\s*$`)
)

// maxBody bounds the description an issue's body gives its story: the
// prompt carries it every iteration.
const maxBody = 16 << 10

// IssuesPRD makes the harness-owned PRD of a run from issues: one story
// per issue in number order — the title (with #N, so that the commit
// names the issue), the body as the description, its task-list lines as
// acceptance criteria, `depends on #N` (an issue among them) as
// dependencies, the label critical as critical, other labels named in
// the notes. gates are the run's quality gates (.ralph/config.yaml
// gates:, --gate): typecheck, lint, test and build become the PRD's
// quality checks, others every story's checks. mask hides secrets in
// what an issue says (nothing ralph writes carries one).
func IssuesPRD(query string, issues []Issue, gates []prd.Gate, branch string, mask func(string) string) (*prd.PRD, error) {
	list := slices.Clone(issues)
	sortIssues(list)
	have := map[int]bool{}
	for _, is := range list {
		have[is.Number] = true
	}
	doc := &prd.PRD{Project: "GitHub issues", Feature: "issues " + query, BranchName: branch,
		Description: "Open issues matching `" + query + "`, one story each (made by ralph; edit the issues, not this file)."}
	checks := doc.QualityChecks.Take(gates)
	for _, is := range list {
		body := mask(is.Body)
		if len(body) > maxBody {
			body = body[:maxBody] + "\n… (the issue's body goes on; read it with `gh issue view " + strconv.Itoa(is.Number) + "`)"
		}
		st := prd.Story{ID: StoryID(is.Number), Title: fmt.Sprintf("%s (#%d)", oneLine(mask(is.Title)), is.Number), Description: body, Checks: checks}
		st.AcceptanceCriteria = taskList(body)
		for _, m := range dependsOn.FindAllStringSubmatch(is.Body, -1) {
			for _, ref := range issueRef.FindAllStringSubmatch(m[1], -1) {
				n, _ := strconv.Atoi(ref[1])
				if id := StoryID(n); have[n] && n != is.Number && !slices.Contains(st.DependsOn, id) {
					st.DependsOn = append(st.DependsOn, id)
				}
			}
		}
		var hints []string
		for _, l := range is.Labels {
			if strings.EqualFold(l.Name, "critical") {
				st.Critical = true
			}
			hints = append(hints, l.Name)
		}
		if len(hints) > 0 {
			st.Notes = "labels: " + strings.Join(hints, ", ")
		}
		doc.Stories = append(doc.Stories, st)
	}
	if err := doc.Validate(); err != nil {
		return nil, err
	}
	return doc, nil
}

// taskList are the task-list lines of a markdown text, checked or not.
func taskList(body string) []string {
	var out []string
	inFence := false
	for _, l := range strings.Split(body, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			inFence = !inFence
			continue
		}
		if m := taskLine.FindStringSubmatch(l); m != nil && !inFence {
			out = append(out, m[2])
		}
	}
	return out
}

// oneLine folds a text to one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
