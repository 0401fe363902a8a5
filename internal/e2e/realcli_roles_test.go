package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/llmtest"
)

// reviewerRoles is the completion trigger in its documented layout.
const reviewerRoles = `triggers:
  - condition: "task_marked_ready_to_complete"
    role: reviewer
`

// TestRealCLIReviewerRole: a reviewer role fires in a run through the real
// Claude Code CLI. The worker's claim passes the gates, the completion
// trigger holds the story for the reviewer, and a fresh claude process
// reviews: its request to the scripted server carries the base prompt, the
// `---` line and the reviewer's text (the server answers it from its
// reviewer branch); its approval lets the story pass.
func TestRealCLIReviewerRole(t *testing.T) {
	c := cliCases[0]
	requireCLI(t, c.bin)
	dir := newRepo(t, map[string]string{"prd.json": oneStoryPRD, "config/roles.yaml": reviewerRoles})
	const finding = "e2e-review-7d21: one.txt holds one, as the story asks."
	srv := startServer(t, &llmtest.Script{
		Steps: storySteps(c, dir),
		Branches: []llmtest.Branch{{When: "# Role: Reviewer", Steps: []llmtest.Step{
			{ToolCalls: []llmtest.ToolCall{c.shell("git log --oneline -3 && cat one.txt")}},
			{Text: "Reviewed the work.\n\n" + finding + "\n\nREVIEW: approve"},
		}}},
	})
	res := ralph(t, dir, nil, runArgs(c, srv, "--max-attempts", "1")...)
	t.Logf("reviewer run took %s, %d requests", res.duration.Round(1e6), len(srv.Requests()))
	if res.code != 0 {
		t.Fatalf("ralph run failed\n%s\n%s", res, transcripts(t, dir, "US-001"))
	}
	for _, want := range []string{"the reviewer must approve before it passes", "role reviewer", "US-001: the reviewer says approve", "1/1 passed"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("ralph's output lacks %q\n%s", want, res)
		}
	}

	// The reviewer's requests: the role text after the base prompt.
	var review []llmtest.LoggedRequest
	for _, r := range srv.Requests() {
		if r.Branch == 1 {
			review = append(review, r)
		}
	}
	if len(review) == 0 {
		t.Fatalf("no request carried the reviewer's role text; requests: %d", len(srv.Requests()))
	}
	body := string(review[0].Body)
	for _, want := range []string{"US-001", `\n---\n`, "# Role: Reviewer", "REVIEW: approve", "Do NOT implement new features"} {
		if !strings.Contains(body, want) {
			t.Errorf("the reviewer's request lacks %q:\n%s", want, tail(body, 3000))
		}
	}
	for _, r := range promptRequests(srv, "US-001") {
		if r.Branch == 0 && strings.Contains(string(r.Body), "# Role: Reviewer") {
			t.Errorf("a worker request carries the reviewer's text")
		}
	}

	// State, events, transcript name, progress.
	st := loadState(t, dir)
	if is := st.Items["US-001"]; is == nil || is.Status != engine.ItemPassed || is.Role != "reviewer" || is.Attempts != 0 {
		t.Errorf("US-001 = %+v, want passed after the reviewer, no attempt spent", is)
	}
	if v := eventsOf(loadEvents(t, dir), "review_verdict"); len(v) != 1 || v[0].Data["verdict"] != "approve" {
		t.Errorf("review_verdict events %+v", v)
	}
	if _, err := os.Stat(filepath.Join(dir, ".ralph", "transcripts", "0002-US-001.reviewer.log")); err != nil {
		t.Errorf("the reviewer's transcript: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".ralph", "progress.md")); !strings.Contains(string(b), "e2e-review-7d21") {
		t.Errorf("progress.md lacks the reviewer's findings:\n%s", b)
	}
}
