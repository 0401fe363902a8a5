package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/llmtest"
	"github.com/ralph-loop/ralph/internal/prd"
)

const prepSpec = "# Notes app\n\ne2e-prep-5c1a: people keep notes; a note has a title and a body.\n"

const prepCycle = "```json\n" + `{"project": "notes", "feature": "notes", "branch_name": "ralph/notes", "user_stories": [
 {"id": "US-001", "title": "note model", "acceptance_criteria": ["go test ./notes passes"], "priority": 1, "depends_on": ["US-002"], "complexity": 1},
 {"id": "US-002", "title": "notes list", "acceptance_criteria": ["GET /notes returns 200"], "priority": 2, "depends_on": ["US-001"], "complexity": 1}]}` + "\n```"

const prepGood = "Fixed the cycle.\n\n```json\n" + `{"project": "notes", "feature": "notes", "branch_name": "ralph/notes", "user_stories": [
 {"id": "US-001", "title": "note model", "acceptance_criteria": ["go test ./notes passes"], "priority": 1, "complexity": 1},
 {"id": "US-002", "title": "notes list", "acceptance_criteria": ["GET /notes returns 200"], "priority": 2, "depends_on": ["US-001"], "complexity": 1}]}` + "\n```"

// TestRealCLIPrepAgent: `ralph prd import` through the real Claude Code
// CLI. The scripted model reads PRD.md with the CLI's shell tool and
// answers with a prd.json that has a dependency cycle; ralph asks again
// with the problem (a second claude process, answered from the server's
// retry branch) and writes the fixed answer.
func TestRealCLIPrepAgent(t *testing.T) {
	c := cliCases[0]
	requireCLI(t, c.bin)
	dir := newRepo(t, map[string]string{"PRD.md": prepSpec})
	srv := startServer(t, &llmtest.Script{
		Steps: []llmtest.Step{
			{ToolCalls: []llmtest.ToolCall{c.shell("cat PRD.md")}},
			{Text: prepCycle},
		},
		Branches: []llmtest.Branch{{When: "Problems with your last answer", Steps: []llmtest.Step{{Text: prepGood}}}},
	})
	res := ralph(t, dir, nil, "prd", "import", "PRD.md", "--agent", c.name, "--base-url", srv.URL(), "--timeout", "2m")
	if res.code != 0 {
		t.Fatalf("ralph prd import failed\n%s", res)
	}
	for _, want := range []string{"attempt 1/4: 1 problem(s)", "dependency cycle", "attempt 2/4: 2 stories, valid", "wrote prd.json"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("ralph's output lacks %q\n%s", want, res)
		}
	}
	doc, err := prd.Load(filepath.Join(dir, "prd.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Stories) != 2 || doc.Stories[1].DependsOn[0] != "US-001" || len(doc.WithoutPasses()) != 0 {
		t.Errorf("prd.json = %+v", doc.Stories)
	}
	// The model saw the spec in the prompt and the tool's output, and the
	// retry carried the problem.
	var first, retry bool
	for _, r := range srv.Requests() {
		body := string(r.Body)
		if r.Branch == 0 && strings.Contains(body, "e2e-prep-5c1a") && strings.Contains(body, "bite-sized") {
			first = true
		}
		if r.Branch == 1 && strings.Contains(body, "dependency cycle") {
			retry = true
		}
	}
	if !first || !retry {
		t.Errorf("requests: first prompt with the spec %v, retry with the problem %v (%d requests)", first, retry, len(srv.Requests()))
	}
	if _, err := os.Stat(filepath.Join(dir, ".ralph", "import")); err != nil {
		t.Errorf("the prompts and transcripts: %v", err)
	}
}
