package runfolder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A new run folder is Ralph-ready; each PROMPT.md instruction, removed
// alone, is reported alone.
func TestNewIsReadyAndEachPromptRuleIsChecked(t *testing.T) {
	root := t.TempDir()
	dir, err := New(root, "Auth flow", "", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir) != "20261123-auth-flow" {
		t.Fatalf("run id %s", filepath.Base(dir))
	}
	if p := Lint(root, dir); len(p) != 0 {
		t.Fatalf("a new run folder is not Ralph-ready: %v", p)
	}
	prompt, _ := os.ReadFile(filepath.Join(dir, Prompt))
	cuts := map[string]string{
		"read-first":                   "## Read first\n\nBefore you change anything, read these files first:",
		"pick next story":              "Pick the next story where passes=false in prd.json",
		"implement + test + commit":    "and commit your work: implement + test + commit, one story only.",
		"set passes=true only when":    "Set passes=true only when every acceptance criterion is met",
		"append progress entry":        "Append a progress entry to progress.md",
		"completion promise tag usage": "<promise>{{.Promise}}</promise>",
	}
	for rule, line := range cuts {
		if !strings.Contains(string(prompt), line) {
			t.Fatalf("the prompt no longer says %q", line)
		}
		cut := strings.Replace(string(prompt), line, "", 1)
		if rule == "implement + test + commit" {
			cut = strings.Replace(cut, "2. Implement it, test it", "2. Do it", 1)
		}
		if err := os.WriteFile(filepath.Join(dir, Prompt), []byte(cut), 0o644); err != nil {
			t.Fatal(err)
		}
		p := Lint(root, dir)
		if len(p) != 1 {
			t.Errorf("without %s: %d problems %v, want 1", rule, len(p), p)
		}
	}
}
