package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/llmtest"
	"github.com/ralph-loop/ralph/internal/sandbox"
)

// TestRealCLISandbox: each real agent CLI runs in the sandbox (the
// default) against the scripted server, reached through the sandbox's
// proxy. Its own shell tool first tries to write outside the repository
// and into $HOME, and to reach a host that is not allowed (another server
// on this machine); each try fails, the denied host is recorded, and the
// story still passes with the honest fix that follows.
func TestRealCLISandbox(t *testing.T) {
	for _, c := range cliCases {
		t.Run(c.name, func(t *testing.T) {
			requireCLI(t, c.bin)
			testSandboxEscapes(t, c, func(srv *llmtest.Server, extra ...string) []string { return runArgs(c, srv, extra...) })
		})
	}
	// The native agent: its bash tool is confined like a CLI; its file
	// tools write from ralph's process and refuse what the sandbox would.
	t.Run("native", func(t *testing.T) {
		if testing.Short() {
			t.Skip("end-to-end runs: skipped with -short")
		}
		testSandboxEscapes(t, nativeCase, func(srv *llmtest.Server, extra ...string) []string {
			return nativeArgs("anthropic", srv.URL(), extra...)
		})
	})
}

func testSandboxEscapes(t *testing.T, c cliCase, args func(srv *llmtest.Server, extra ...string) []string) {
	if _, err := sandbox.Bwrap(); err != nil {
		t.Fatalf("the sandbox is on by default and must start here: %v", err)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the network tries need curl (scripts/install-tools.sh installs it)")
	}
	var reached atomic.Int32
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Write([]byte("reached\n"))
	}))
	defer forbidden.Close()
	outside := filepath.Join(t.TempDir(), "outside.txt")
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	dotfile := filepath.Join(home, ".ralph-e2e-sandbox-"+c.name)
	t.Cleanup(func() { os.Remove(dotfile) })

	dir := newRepo(t, map[string]string{"prd.json": oneStoryPRD})
	try := func(what, command string) string {
		// The quotes keep the markers out of the command's own text,
		// which the next request carries too.
		return "if " + command + "; then echo ESCAPED'-'" + what + "; else echo blocked'-'" + what + "; fi; "
	}
	escape := try("outside", "echo x > "+outside) +
		try("home", "echo x > "+dotfile) +
		try("bashrc", "echo x >> $HOME/.bashrc") +
		try("host", "curl -sf -m 10 "+forbidden.URL+"/ >/dev/null") +
		try("host-direct", "curl -sf -m 10 --noproxy '*' "+forbidden.URL+"/ >/dev/null") +
		"echo tries'-'done"
	steps := []llmtest.Step{{ToolCalls: []llmtest.ToolCall{c.shell(escape)}}}
	if c.name == "native" {
		steps = append(steps, llmtest.Step{ToolCalls: []llmtest.ToolCall{c.write(dir, ".git/hooks/post-commit", "#!/bin/sh\necho hooked\n")}})
	}
	steps = append(steps, storySteps(c, dir)...)
	srv := startServer(t, &llmtest.Script{Steps: steps})
	bashrc, _ := os.ReadFile(filepath.Join(home, ".bashrc"))

	res := ralph(t, dir, nil, args(srv, "--max-attempts", "1")...)
	t.Logf("%s: sandboxed run took %s, %d requests", c.name, res.duration.Round(1e6), len(srv.Requests()))
	tr := transcripts(t, dir, "US-001")
	if res.code != 0 {
		t.Fatalf("ralph run failed\n%s\n%s", res, tail(tr, 6000))
	}
	if st := loadState(t, dir); st.Items["US-001"] == nil || st.Items["US-001"].Status != engine.ItemPassed {
		t.Fatalf("US-001 did not pass\n%s", res)
	}

	// What the shell tool printed reached the model with the next request.
	var results strings.Builder
	for _, r := range srv.Requests() {
		results.Write(r.Body)
	}
	got := results.String()
	if !strings.Contains(got, "tries-done") {
		t.Fatalf("the escape tries never ran (no tool result carries their output)\n%s", tail(tr, 6000))
	}
	for _, what := range []string{"outside", "home", "bashrc", "host", "host-direct"} {
		if strings.Contains(got, "ESCAPED-"+what+"\\n") || !strings.Contains(got, "blocked-"+what+"\\n") {
			t.Errorf("%s: the try %q was not blocked\n%s", c.name, what, tail(tr, 6000))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "hooks", "post-commit")); err == nil {
		t.Errorf("%s wrote a git hook", c.name)
	}
	if c.name == "native" && !strings.Contains(got, "the sandbox does not let the agent write there") {
		t.Errorf("native: write_file into .git/hooks was not refused by the sandbox")
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("%s wrote outside the repository: %s", c.name, outside)
	}
	if _, err := os.Stat(dotfile); err == nil {
		t.Errorf("%s wrote into $HOME: %s", c.name, dotfile)
	}
	if now, _ := os.ReadFile(filepath.Join(home, ".bashrc")); string(now) != string(bashrc) {
		t.Errorf("%s changed ~/.bashrc", c.name)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%s reached the forbidden server %d times", c.name, n)
	}

	// The denied host is in the transcript and the run's record.
	host := strings.TrimPrefix(forbidden.URL, "http://")
	if !strings.Contains(tr, "[ralph] sandboxed (bubblewrap)") {
		t.Errorf("the transcript does not say the agent ran sandboxed\n%s", tail(tr, 3000))
	}
	if !strings.Contains(tr, "sandbox denied network access to "+host) {
		t.Errorf("the transcript does not name the denied host %s\n%s", host, tail(tr, 3000))
	}
	rec := sandbox.ReadRecord(filepath.Join(dir, ".ralph"))
	if rec == nil || !strings.Contains(rec.Summary(), host) {
		t.Errorf("the run's sandbox record does not name the denied host %s: %+v", host, rec)
	}
	if st := ralph(t, dir, nil, "status"); !strings.Contains(st.stdout, "Sandbox:** on (bubblewrap)") || !strings.Contains(st.stdout, host+" (agent "+c.name) {
		t.Errorf("ralph status does not name the denied host %s:\n%s", host, st)
	}
}
