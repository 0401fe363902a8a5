package planchat

import (
	"slices"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/prd"
)

func TestParseQuestions(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"Two.\n```json\n{\"questions\": [\"A?\", \"  B\\n?  \"]}\n```", []string{"A?", "B ?"}, true},
		{`{"questions": []}`, nil, true},
		{"first ```json\n{\"questions\": [\"old\"]}\n``` then ```json\n{\"questions\": [\"new\"]}\n```", []string{"new"}, true},
		{"no block here", nil, false},
		{`{"stories": []}`, nil, false},
		{`{"questions": [1, "x"]}`, []string{"x"}, true},
	} {
		got, ok := ParseQuestions(c.in)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("ParseQuestions(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	many := `{"questions": ["1","2","3","4","5","6","7","8","9","10"]}`
	if got, _ := ParseQuestions(many); len(got) != MaxQuestions {
		t.Errorf("%d questions kept", len(got))
	}
}

func TestReadAnswers(t *testing.T) {
	for _, c := range []struct{ name, in string }{
		{"list.yaml", "- minus\n- No, two.\n"},
		{"list.json", `["minus", "No, two."]`},
		{"map.yaml", "2: No, two.\n1: minus\n"},
		{"q.yaml", "q1: minus\nq2: No, two.\n"},
		{"lines.txt", "# answers\nminus\n\nNo, two.\n"},
		{"numbered.txt", "2) No, two.\n1: minus\n"},
	} {
		got, err := ReadAnswers(c.name, []byte(c.in), 2)
		if err != nil || !slices.Equal(got, []string{"minus", "No, two."}) {
			t.Errorf("%s: %q, %v", c.name, got, err)
		}
	}
	if _, err := ReadAnswers("a.yaml", []byte("1: x\n"), 2); err == nil || !strings.Contains(err.Error(), "a.yaml answers 1 of 2 questions: none for question 2") {
		t.Errorf("a missing answer: %v", err)
	}
	if _, err := ReadAnswers("a.yaml", []byte("- x\n- y\n- z\n"), 2); err == nil || !strings.Contains(err.Error(), "answer to question 3, but there are 2 questions") {
		t.Errorf("too many answers: %v", err)
	}
	if got, err := ReadAnswers("none", nil, 0); err != nil || len(got) != 0 {
		t.Errorf("no questions: %q %v", got, err)
	}
}

func FuzzReadAnswers(f *testing.F) {
	f.Add("- a\n- b\n", 2)
	f.Add("1: a\nq2: b", 2)
	f.Add("x\n2) y\n", 3)
	f.Fuzz(func(t *testing.T, in string, n int) {
		if n < 0 || n > 20 {
			return
		}
		got, err := ReadAnswers("f", []byte(in), n)
		if err == nil && len(got) != n {
			t.Errorf("%d answers for %d questions", len(got), n)
		}
	})
}

func FuzzParseQuestions(f *testing.F) {
	f.Add("```json\n{\"questions\": [\"a\"]}\n```")
	f.Fuzz(func(t *testing.T, in string) {
		qs, _ := ParseQuestions(in)
		if len(qs) > MaxQuestions {
			t.Errorf("%d questions", len(qs))
		}
		for _, q := range qs {
			if q == "" || strings.ContainsAny(q, "\n\t") {
				t.Errorf("question %q", q)
			}
		}
	})
}

func TestStoriesPromptAndShow(t *testing.T) {
	p := StoriesPrompt("subtract", []QA{{"Name?", "minus"}, {"More?", ""}}, prd.QualityChecks{Test: "make test"}, `{"x":1}`, "call it subtract", []string{"story US-2 has no checks"})
	for _, want := range []string{"## The request\n\nsubtract", "1. Name?\n   minus", "2. More?\n   (no answer: decide yourself", "- test: `make test`", "## Your last proposal", "call it subtract", "story US-2 has no checks"} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
	doc := &prd.PRD{Feature: "F", BranchName: "b", Stories: []prd.Story{{ID: "US-1", Title: "t", Priority: 1, AcceptanceCriteria: []string{"c"}, Checks: []string{"true"}, DependsOn: []string{"US-0"}}}}
	if s := Show(doc); !strings.Contains(s, "1. US-1  t  (after US-0)") || !strings.Contains(s, "   - c") || !strings.Contains(s, "   check: true") {
		t.Errorf("Show:\n%s", s)
	}
	for path, want := range map[string]string{"prd.json": "prd", "t.jsonl": "tasks", "P.md": "markdown", "x": "prd"} {
		if got := Format(path); got != want {
			t.Errorf("Format(%s) = %s", path, got)
		}
	}
}
