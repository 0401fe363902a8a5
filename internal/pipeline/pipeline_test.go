package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/proc"
)

func TestParseValid(t *testing.T) {
	src := `name: p
prd: spec.md
stages:
  - name: a
    prompt: "Read {{.PRDPath}} for {{.Stage}} (iteration {{.Iteration}})"
    exit:
      any:
        - file_lines: {path: a.md, min: 2}
        - all:
          - promise: DONE
          - command: [sh, -c, "exit 0"]
    max_iterations: 4
`
	p, err := parse("p.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stage("a")
	if s == nil || s.MaxIterations != 4 || p.PRD != "spec.md" {
		t.Fatalf("got %+v", p)
	}
	out, err := s.Render(engine.PromptData{PRDPath: "/x/spec.md", Stage: "a", Iteration: 3})
	if err != nil || out != "Read /x/spec.md for a (iteration 3)" {
		t.Fatalf("render = %q, %v", out, err)
	}
	if got := s.Exit.Promises(); len(got) != 1 || got[0] != "DONE" {
		t.Fatalf("promises = %v", got)
	}
	if d := s.Exit.Describe(); !strings.Contains(d, "any of: a.md has at least 2 lines; (all of: the final message ends with <promise>DONE</promise>; `sh -c 'exit 0'` exits 0)") {
		t.Fatalf("describe = %q", d)
	}
}

func TestValidationNamesStageFieldAndLine(t *testing.T) {
	src := `name: p
stages:
  - name: qa
    prompt: x
    exit:
      file_lines: {path: t.md, min: 0}
    max_iterations: -1
  - name: qa
    prompt: y
    prompt_file: y.md
    exit:
      dir_files: {path: /abs, min: 1, glob: "[x"}
  - name: "bad name"
    prompt: "{{.Nope}}"
    exit: {command: []}
`
	_, err := parse("pipeline.yaml", []byte(src), nil)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`pipeline.yaml:6:37: stage "qa": exit.file_lines.min must be ≥ 1`,
		`stage "qa": max_iterations must be ≥ 1`,
		`stage "qa": name is used by an earlier stage`,
		`stage "qa": prompt and prompt_file are both set`,
		`stage "qa": exit.dir_files.path "/abs" must be relative`,
		`stage "qa": exit.dir_files.glob "[x" is not a valid glob`,
		`stage "bad name": name must be letters`,
		`stage "bad name": prompt template:`,
		`stage "bad name": exit.command must be an argv list`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	var ve *validationError
	if ok := asValidation(err, &ve); !ok || !ve.UsageError() {
		t.Fatalf("error type %T", err)
	}
}

func asValidation(err error, ve **validationError) bool {
	v, ok := err.(*validationError)
	*ve = v
	return ok
}

func TestSyntaxAndStrictErrors(t *testing.T) {
	_, err := parse("p.yaml", []byte("name: p\nstages:\n  - name: a\n    promt: x\n"), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "p.yaml:4:5: ") || !strings.Contains(err.Error(), "promt") {
		t.Fatalf("err = %v", err)
	}
	_, err = parse("p.yaml", []byte("name: [\n"), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "p.yaml:") {
		t.Fatalf("err = %v", err)
	}
}

func TestEval(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("arch.md", strings.Repeat("x\n", 11)+"last")
	write("src/a.go", "")
	write("src/sub/b.go", "")
	write("src/c.txt", "")
	ctx := context.Background()
	env := Env{Dir: dir, Runner: proc.Exec{}, FinalText: "all good\n<promise>DONE</promise>", Prompt: "end with <promise>DONE</promise> when done"}
	cases := []struct {
		c      Condition
		met    bool
		detail string
	}{
		{Condition{FileLines: &FileLines{Path: "arch.md", Min: 50}}, false, "arch.md has 12 lines, needs 50"},
		{Condition{FileLines: &FileLines{Path: "arch.md", Min: 12}}, true, "arch.md has 12 lines (≥ 12)"},
		{Condition{FileLines: &FileLines{Path: "nope.md", Min: 1}}, false, "nope.md does not exist, needs 1 lines"},
		{Condition{DirFiles: &DirFiles{Path: "src", Min: 3}}, true, "src/ holds 3 files (≥ 3)"},
		{Condition{DirFiles: &DirFiles{Path: "src", Min: 3, Glob: "*.go"}}, false, "src/ holds 2 files matching *.go, needs 3"},
		{Condition{Promise: ptr("DONE")}, true, "the final message carries <promise>DONE</promise>"},
		{Condition{Promise: ptr("FINISHED")}, false, "does not end with <promise>FINISHED</promise>"},
		{Condition{Command: []string{"sh", "-c", "echo broken; exit 3"}}, false, "`sh -c 'echo broken; exit 3'` exited 3:\nbroken"},
		{Condition{All: []Condition{{Promise: ptr("DONE")}, {FileLines: &FileLines{Path: "arch.md", Min: 99}}}}, false, "arch.md has 12 lines, needs 99"},
		{Condition{Any: []Condition{{FileLines: &FileLines{Path: "arch.md", Min: 99}}, {Command: []string{"true"}}}}, true, "`true` exited 0"},
	}
	for _, c := range cases {
		met, detail := c.c.Eval(ctx, env)
		if met != c.met || !strings.Contains(detail, c.detail) {
			t.Errorf("%s: got (%v, %q), want (%v, …%q…)", c.c.Describe(), met, detail, c.met, c.detail)
		}
	}
	// An echoed instruction is not a promise.
	env.FinalText = "end with <promise>DONE</promise> when done"
	if met, _ := (&Condition{Promise: ptr("DONE")}).Eval(ctx, env); met {
		t.Error("echoed prompt line counted as a promise")
	}
}

func ptr(s string) *string { return &s }

func TestPresetPagent(t *testing.T) {
	p, err := LoadPreset("pagent", "docs/my prd.md", "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range p.Stages {
		names = append(names, s.Name+"="+s.Exit.Describe())
	}
	want := "architect=architecture.md has at least 50 lines|qa=test-plan.md has at least 30 lines|security=security-assessment.md has at least 20 lines|implementer=src/ holds at least 3 files|verifier=the final message ends with <promise>DONE</promise>"
	if got := strings.Join(names, "|"); got != want {
		t.Fatalf("stages\n got %s\nwant %s", got, want)
	}
	if p.PRD != "docs/my prd.md" {
		t.Fatalf("prd = %q", p.PRD)
	}
	out, err := p.Stage("architect").Render(engine.PromptData{PRDPath: "/r/docs/my prd.md", Stage: "architect", Iteration: 1})
	if err != nil || !strings.Contains(out, "/r/docs/my prd.md") {
		t.Fatalf("render: %v\n%s", err, out)
	}
	if _, err := PresetFiles("nope", ""); err == nil {
		t.Fatal("unknown preset accepted")
	}
}

func TestCountLines(t *testing.T) {
	for s, n := range map[string]int{"": 0, "a": 1, "a\n": 1, "a\nb": 2, "\n\n": 2} {
		if got := countLines([]byte(s)); got != n {
			t.Errorf("CountLines(%q) = %d, want %d", s, got, n)
		}
	}
}
