package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetectPromise(t *testing.T) {
	prompt := "Work on US-001.\nWhen done, end with <promise>COMPLETE</promise> on its own line.\n<promise>COMPLETE</promise>\n"
	for _, tc := range []struct {
		name, final string
		want        bool
	}{
		{"plain", "Done.\n<promise>COMPLETE</promise>", true},
		{"inline", "All good <promise>COMPLETE</promise>", true},
		{"spaces inside", "<promise>  COMPLETE </promise>", true},
		{"multi-line tag", "<promise>\nCOMPLETE\n</promise>", true},
		{"other text", "<promise>DONE</promise>", false},
		{"no tag", "COMPLETE", false},
		{"in a code block", "Here is the tool output:\n```\n<promise>COMPLETE</promise>\n```\nStill working.", false},
		{"in a tilde block", "~~~\n<promise>COMPLETE</promise>\n~~~", false},
		{"echoed prompt line", "When done, end with <promise>COMPLETE</promise> on its own line.", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DetectPromise(tc.final, "COMPLETE", prompt); got != tc.want {
				t.Fatalf("DetectPromise(%q) = %v, want %v", tc.final, got, tc.want)
			}
		})
	}
	if DetectPromise("<promise>COMPLETE</promise>", "", prompt) {
		t.Fatal("an empty promise never matches")
	}
}

func TestExtractLearnings(t *testing.T) {
	final := "Did it.\n\n## Learnings\n- Use table tests\n* keep calc.go small\n\n## Next\n- not a learning\nLEARNING: Atoi rejects empty strings\n```\nLEARNING: in a block\n```\n<promise>COMPLETE</promise>"
	got := extractLearnings(final)
	want := []string{"Use table tests", "keep calc.go small", "Atoi rejects empty strings"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestBuildPrompt(t *testing.T) {
	d := PromptData{Kind: "story", ItemID: "US-002", Title: "Sub", Description: "Subtract.", Criteria: []string{"TestSub passes"},
		Iteration: 3, MaxIterations: 30, Attempt: 2, MaxAttempts: 3, Promise: "COMPLETE", PRDPath: "prd.json",
		ProgressPath: ".ralph/progress.md", RetryContext: "Gate `test` failed", Progress: "## entry"}
	p, err := buildPrompt("built-in", DefaultPrompt, "# Role: debugger", d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"US-002 — Sub", "- TestSub passes", "attempt 2 of 3", "## Previous attempt failed", "Gate `test` failed", "## Progress so far", "# Role: debugger", "prd.json"} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
	// The built-in prompt names the tag without writing it, so an agent
	// echoing its prompt never looks like a claim.
	if DetectPromise(p, "COMPLETE", p) || strings.Contains(p, "<promise>COMPLETE</promise>") {
		t.Fatal("the prompt itself must not carry a detectable promise")
	}
	if _, err := buildPrompt("PROMPT.md", "{{.Nope}}", "", d); err == nil || !strings.Contains(err.Error(), "PROMPT.md") {
		t.Fatalf("unknown variable must fail naming the file: %v", err)
	}
	if err := checkTemplate("PROMPT.md", "{{.ItemID"); err == nil {
		t.Fatal("syntax error must fail")
	}
}

func TestProgressDigestIsBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "progress.md")
	var b strings.Builder
	for i := 0; i < 500; i++ {
		b.WriteString("\n## entry " + strings.Repeat("x", 50) + "\n- line\n")
	}
	os.WriteFile(p, []byte(b.String()), 0o644)
	d := (&memory{patternsMax: 250, window: 1000}).digest(p)
	if len(d) > 1000 || !strings.HasPrefix(d, "## entry") {
		t.Fatalf("digest %d bytes, starts %q", len(d), d[:20])
	}
	if newMemory(100).digest(filepath.Join(t.TempDir(), "none")) != "" {
		t.Fatal("missing file gives empty digest")
	}
}

// The built-in prompt's rule about "done" names only what the kind has: a
// story's PRD, a task (no PRD: no empty path), a stage (its exit condition,
// never "passes"); a stage's iteration is its own loop's.
func TestDefaultPromptPerKind(t *testing.T) {
	for _, c := range []struct {
		d        PromptData
		want     []string
		mustNot  []string
		numbered string
	}{
		{d: PromptData{Kind: "story", PRDPath: "/r/prd.json", ItemID: "S-1", Iteration: 4, MaxIterations: 9, Attempt: 2, MaxAttempts: 3},
			want: []string{`Do not set "passes" in /r/prd.json and`, "marks the story passed", "Iteration 4 of at most 9; attempt 2 of 3 on this story."}},
		{d: PromptData{Kind: "task", TasksPath: "/r/tasks.jsonl", ItemID: "A.1", Iteration: 1, MaxIterations: 5, Attempt: 1, MaxAttempts: 3},
			want: []string{"Do not edit quality checks", "marks the task done"}, mustNot: []string{`"passes"`, " in  "}},
		{d: PromptData{Kind: "stage", PRDPath: "/r/spec.md", ItemID: "verifier", Stage: "verifier", Iteration: 2, MaxIterations: 5, RunIteration: 7},
			want: []string{"exit condition", "Stage iteration 2 of at most 5 (iteration 7 of the run)."}, mustNot: []string{`"passes"`}},
	} {
		out, err := buildPrompt("built-in", DefaultPrompt, "", c.d)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s prompt lacks %q:\n%s", c.d.Kind, w, out)
			}
		}
		for _, w := range c.mustNot {
			if strings.Contains(out, w) {
				t.Errorf("%s prompt has %q:\n%s", c.d.Kind, w, out)
			}
		}
	}
}
