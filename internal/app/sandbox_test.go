package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/sandbox"
)

// TestConfinedAgentReadOnly: the files a request names read-only (an
// item's protected tests) cannot be changed, removed or renamed by the
// confined agent; the rest of its tree can. Control: the same agent
// unconfined changes them.
func TestConfinedAgentReadOnly(t *testing.T) {
	if _, err := sandbox.Bwrap(); err != nil {
		t.Fatal(err) // the sandbox is on by default: its tests fail, never skip
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", dir, "init", "-q", "-b", "main").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	protected := filepath.Join(dir, "calc_test.go")
	if err := os.WriteFile(protected, []byte("package calc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `echo x >> calc_test.go 2>/dev/null && echo CHANGED
rm -f calc_test.go 2>/dev/null; test -e calc_test.go || echo REMOVED
echo y > calc.go && echo WROTE
echo '<promise>COMPLETE</promise>'`
	a, err := agent.New("cmd", agent.Options{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Policy{Caches: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	paths := engine.PathsFor(dir)
	run := func(ag agent.Agent) string {
		var tr strings.Builder
		if _, err := ag.Run(context.Background(), agent.Request{Prompt: "p", Dir: dir, Timeout: time.Minute, Transcript: &tr, ReadOnly: []string{protected}}); err != nil {
			t.Fatal(err)
		}
		return tr.String()
	}
	out := run(Confine(a, sb, paths, "", nil))
	if strings.Contains(out, "CHANGED") || strings.Contains(out, "REMOVED") || !strings.Contains(out, "WROTE") {
		t.Fatalf("confined: the protected file was changed, or the tree not writable:\n%s", out)
	}
	if b, _ := os.ReadFile(protected); string(b) != "package calc\n" {
		t.Fatalf("calc_test.go = %q", b)
	}
	if out := run(a); !strings.Contains(out, "CHANGED") || !strings.Contains(out, "REMOVED") {
		t.Fatalf("control: unconfined, the agent could not change the file:\n%s", out)
	}
}
