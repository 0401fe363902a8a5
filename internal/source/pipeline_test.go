package source

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
)

const testPipeline = `name: t
prd: spec.md
stages:
  - name: design
    title: Design
    prompt: "Design from {{.PRDPath}} ({{.Stage}})"
    exit: {file_lines: {path: design.md, min: 3}}
    max_iterations: 2
  - name: check
    prompt: "Say {{.Promise}} when done"
    exit: {promise: SHIPPED}
`

func newPipelineRepo(t *testing.T) (*Pipeline, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	repo, err := git.Init(ctx, proc.Exec{}, dir, "main")
	if err != nil {
		t.Skipf("git: %v", err)
	}
	for p, s := range map[string]string{"spec.md": "# spec\n", ".ralph/pipeline.yaml": testPipeline} {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(s), 0o644)
	}
	if err := repo.EnsureExcluded(ctx, "/.ralph/"); err != nil {
		t.Fatal(err)
	}
	if err := repo.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit(ctx, "init", false); err != nil {
		t.Fatal(err)
	}
	s, err := OpenPipeline(filepath.Join(dir, ".ralph/pipeline.yaml"), dir, repo, proc.Exec{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestPipelineSourceFlow(t *testing.T) {
	ctx := context.Background()
	s, dir := newPipelineRepo(t)
	st := &engine.State{RunID: "run-1", StartedAt: time.Now().UTC(), Items: map[string]*engine.ItemState{}}
	for _, it := range s.Items() {
		st.Items[it.ID] = &engine.ItemState{ID: it.ID, Status: engine.ItemPending}
	}
	if items := s.Items(); items[0].MaxAttempts != 2 || items[1].MaxAttempts != 0 {
		t.Fatalf("MaxAttempts = %d, %d", items[0].MaxAttempts, items[1].MaxAttempts)
	}
	if info := s.Info(); info.PRDPath != filepath.Join(dir, "spec.md") || info.ItemKind != "stage" {
		t.Fatalf("info = %+v", info)
	}
	it, _ := s.Next(st, nil)
	if it == nil || it.ID != "design" || it.Kind != "stage" {
		t.Fatalf("next = %+v", it)
	}
	g := newJudging(t, s.Git, s, st)
	ws := g.prepare(it)
	if ws.Dir != dir || ws.Isolated || ws.Follow == nil {
		t.Fatalf("prepare = %+v", ws)
	}
	if it.Template != "Design from {{.PRDPath}} ({{.Stage}})" || it.Promise != "" {
		t.Fatalf("stage item = %+v", it)
	}
	if terms := s.Terms(it, st); terms.Target != "main" || !terms.Claimed || terms.Subject != "pipeline(design): Design stage complete" {
		t.Fatalf("terms = %+v", terms)
	}

	// The exit condition is asked on the judge's checkout of the work.
	os.WriteFile(filepath.Join(dir, "design.md"), []byte("one\n"), 0o644)
	v, _ := g.judge(&engine.Attempt{Item: it, Dir: dir})
	if v.Passed || !strings.Contains(v.Failure, "design.md has 1 line, needs 3") || !strings.Contains(v.Summary, "exit condition not met") {
		t.Fatalf("verdict = %+v", v)
	}
	if v, _ := g.judge(&engine.Attempt{Item: it, Dir: dir, Result: agent.Result{ExitCode: 1}}); v.Passed || !strings.Contains(v.Summary, "agent exited with code 1") {
		t.Fatalf("failed agent verdict = %+v", v)
	}
	os.WriteFile(filepath.Join(dir, "design.md"), []byte("1\n2\n3\n"), 0o644)
	st.Items["design"].Runs = 2
	att := &engine.Attempt{Item: it, Dir: dir, Learnings: []string{"three lines"}}
	v, commit := g.judge(att)
	if !v.Passed || commit == "" || !strings.Contains(v.Summary, "exit condition met: design.md has 3 lines") {
		t.Fatalf("verdict = %+v, commit %q", v, commit)
	}
	if head, _ := s.Git.Head(ctx); head != commit {
		t.Fatalf("main is at %s, the stage landed as %s", head, commit)
	}
	msg, _ := s.Git.Message(ctx, commit)
	for _, want := range []string{"pipeline(design): Design stage complete", "- three lines", "Verified by ralph: exit condition met", "Ralph-Stage: design", "Ralph-Run: run-1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	// The main tree followed: its index is the commit's, nothing is dirty.
	if dirty := gitOut(t, s.Git, "status", "--porcelain"); dirty != "" {
		t.Fatalf("the tree after the landing:\n%s", dirty)
	}
	if c, done, _ := s.Recover(ctx, it, st); !done || c != commit {
		t.Fatalf("recover = %q %v", c, done)
	}
	var ps PipelineState
	b, _ := os.ReadFile(filepath.Join(dir, ".ralph", "pipeline.json"))
	if err := json.Unmarshal(b, &ps); err != nil {
		t.Fatal(err)
	}
	if ps.Stage != "check" || ps.Iterations["design"] != 2 || ps.PRDFile != "spec.md" || len(ps.Stages) != 2 || ps.Stages[0].Status != "passed" {
		t.Fatalf("pipeline.json = %s", b)
	}

	st.Items["design"].Status = engine.ItemPassed
	it, _ = s.Next(st, nil)
	if it == nil || it.ID != "check" {
		t.Fatalf("next = %+v", it)
	}
	if it.Promise != "SHIPPED" || it.Template != "Say {{.Promise}} when done" {
		t.Fatalf("stage item = %+v", it)
	}
	g.prepare(it)
	os.WriteFile(filepath.Join(dir, "check.md"), []byte("checked\n"), 0o644)
	att = &engine.Attempt{Item: it, Dir: dir, Prompt: "Say SHIPPED when done", Result: agent.Result{FinalText: "ok\n"}}
	if v, _ := g.judge(att); v.Passed || !strings.Contains(v.Summary, "exit condition not met") {
		t.Fatalf("verdict without the promise = %+v", v)
	}
	g.prepare(it)
	att.Result.FinalText = "ok\n<promise>SHIPPED</promise>"
	if v, sha := g.judge(att); !v.Passed || !v.Claimed || sha == "" {
		t.Fatalf("verdict = %+v", v)
	}
	if got := gitOut(t, s.Git, "log", "--format=%s", "-2"); got != "pipeline(check): check stage complete\npipeline(design): Design stage complete" {
		t.Fatalf("history:\n%s", got)
	}
	st.Items["check"].Status = engine.ItemPassed
	if it, _ := s.Next(st, nil); it != nil {
		t.Fatalf("next after all passed = %+v", it)
	}
}

func TestPipelineBlockedStageStopsOrder(t *testing.T) {
	s, _ := newPipelineRepo(t)
	st := &engine.State{Items: map[string]*engine.ItemState{"design": {Status: engine.ItemBlocked}}}
	if it, _ := s.Next(st, nil); it != nil {
		t.Fatalf("a later stage started after a blocked one: %+v", it)
	}
	if err := s.Block(context.Background(), &engine.Item{ID: "design"}, st, "failed 2 attempts"); err != nil {
		t.Fatal(err)
	}
}

func TestOpenPipelineErrors(t *testing.T) {
	dir := t.TempDir()
	repo := &git.Repo{Dir: dir, Runner: proc.Exec{}}
	if _, err := OpenPipeline(filepath.Join(dir, "none.yaml"), dir, repo, proc.Exec{}, 0); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("name: p\nprd: gone.md\nstages: [{name: a, prompt: x, exit: {promise: D}}]\n"), 0o644)
	if _, err := OpenPipeline(filepath.Join(dir, "p.yaml"), dir, repo, proc.Exec{}, 0); err == nil || !strings.Contains(err.Error(), "prd gone.md does not exist") {
		t.Fatalf("err = %v", err)
	}
	if _, err := OpenPipeline("pagent", dir, repo, proc.Exec{}, 0); err == nil || !strings.Contains(err.Error(), "PRD.md") {
		t.Fatalf("err = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "PRD.md"), []byte("x"), 0o644)
	s, err := OpenPipeline("pagent", dir, repo, proc.Exec{}, 0)
	if err != nil || len(s.Items()) != 5 || s.Info().Path != "pagent (built-in)" {
		t.Fatalf("preset: %v", err)
	}
}
