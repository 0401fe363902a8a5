package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/llmtest"
)

// TestHookCodexExecNeedsHookTrustBypass: the real Codex, headless (`codex
// exec`), with ralph's Stop hook in its hooks.json and an in-session loop
// armed. As the docs say, `codex exec` runs the hook only with
// --dangerously-bypass-hook-trust: without it the session ends after its
// first turn and the loop is never continued; with it the hook blocks the
// first stop, hands back the prompt, and the promise ends the loop.
func TestHookCodexExecNeedsHookTrustBypass(t *testing.T) {
	requireCLI(t, "codex")
	ralphBin := buildRalph(t)
	scenario := func(args ...string) (string, *llmtest.Server, string) {
		dir := newRepo(t, map[string]string{"README.md": "# codex hook e2e\n"})
		// The second turn does the work (the hook's judge passes no claim
		// without it), then says the promise.
		srv := startServer(t, &llmtest.Script{Steps: []llmtest.Step{
			{Text: "working"},
			{ToolCalls: []llmtest.ToolCall{tc("exec_command", map[string]any{"cmd": "echo done > done.txt", "login": false})}},
			{Text: "done <promise>DONE</promise>"},
		}})
		a, err := agent.New("codex", agent.Options{BaseURL: srv.URL(), Args: args})
		if err != nil {
			t.Fatal(err)
		}
		// The adapter's private CODEX_HOME, where Codex reads the user's
		// hooks.json: the hook installed there, by its user scope.
		home := filepath.Join(dir, ".ralph", "agents", "codex-home")
		if r := runBin(t, dir, "", []string{"CODEX_HOME=" + home}, ralphBin, "hook", "install", "--codex", "--scope", "user"); r.code != 0 {
			t.Fatalf("hook install:\n%s", r)
		}
		if b, err := os.ReadFile(filepath.Join(home, "hooks.json")); err != nil || !strings.Contains(string(b), ralphBin) {
			t.Fatalf("hooks.json: %v\n%s", err, b)
		}
		const prompt = "Work on it; print <promise>DONE</promise> when done."
		if r := runBin(t, dir, "", nil, ralphBin, "loop", "start", prompt, "--completion-promise", "DONE", "--max-iterations", "3"); r.code != 0 {
			t.Fatalf("loop start:\n%s", r)
		}
		var tr bytes.Buffer
		res, err := a.Run(t.Context(), agent.Request{Prompt: prompt, Dir: dir, Timeout: 3 * time.Minute, Transcript: &tr})
		if err != nil || res.Failed() {
			t.Fatalf("codex: %v %+v\n%s", err, res, tail(tr.String(), 4000))
		}
		return dir, srv, tr.String()
	}

	// Without the flag: no hook ran, the loop is still armed at iteration 1.
	dir, srv, tr := scenario()
	if _, err := os.Stat(filepath.Join(dir, ".ralph", "hook.json")); err != nil {
		t.Errorf("the loop was disarmed without the flag (%v)\n%s", err, tail(tr, 3000))
	}
	if last := highestStep(srv); last != 0 {
		t.Errorf("without the flag the model was asked for step %d; the hook must not have run", last)
	}

	// With it: blocked once, then the promise ends the loop.
	dir, srv, tr = scenario("--dangerously-bypass-hook-trust")
	if _, err := os.Stat(filepath.Join(dir, ".ralph", "hook.json")); !os.IsNotExist(err) {
		t.Errorf(".ralph/hook.json still there after the promise (%v)\n%s", err, tail(tr, 3000))
	}
	if last := highestStep(srv); last != 2 {
		t.Errorf("highest step served = %d, want 2 (the hook's block brought the second turn)", last)
	}
	st := loadState(t, dir)
	if st.Status != "complete" || st.Iteration != 2 {
		t.Errorf("state %s at iteration %d, want complete at 2\n%s", st.Status, st.Iteration, tail(tr, 3000))
	}
}
