package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
)

// TestBrowserAnswer: an agent asks a person (`ralph ask`); the web
// dashboard shows the story waiting for an answer with the question, a
// person types the answer into the page — while another story passes
// and the page's items are drawn anew under the field — and sends it,
// and the story's next iteration has it in its prompt. The answer is
// recorded as the web dashboard's.
func TestBrowserAnswer(t *testing.T) {
	self, _ := os.Executable()
	flags := t.TempDir()
	dir := newRepo(t, map[string]string{
		"prd.json": `{"project":"web","branch_name":"ralph/web","quality_checks":{"test":"true"},"user_stories":[{"id":"S-1","title":"a button","priority":1,"checks":["test -f S-1.txt"]},{"id":"S-2","title":"a label","priority":2,"checks":["test -f S-2.txt"]}]}`,
		"agent.sh": `prompt=$(cat)
if [ "$RALPH_ITEM_ID" = S-2 ]; then
  while [ ! -f ` + flags + `/go ]; do sleep 0.05; done
  echo label > S-2.txt
  echo '<promise>COMPLETE</promise>'
elif echo "$prompt" | grep -q '  Answer: '; then
  echo "$prompt" | sed -n 's/^  Answer: //p' > S-1.txt
  echo '<promise>COMPLETE</promise>'
else
  "$RALPH_BIN" ask 'Which colour should the button be?'
fi
`,
	})
	p := engine.PathsFor(dir)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	env := append(os.Environ(), asRalph+"=1", "RALPH_BIN="+self, "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")
	url := startServe(ctx, t, self, dir, env)

	run := exec.CommandContext(ctx, self, "run", "--plain", "--no-sandbox", "--parallel", "2", "--agent", "cmd", "--agent-cmd", "sh agent.sh")
	run.Dir, run.Env = dir, env
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = os.WriteFile(filepath.Join(flags, "go"), nil, 0o644)
		_ = run.Process.Kill()
		_ = run.Wait()
	}()
	events := func() string { b, _ := os.ReadFile(p.Events); return string(b) }
	waitFor(t, func() bool { return strings.Contains(events(), `"type":"question_asked"`) }, stringer(events))

	page := startChromium(ctx, t)
	page.open(url)
	page.waitFor(`!!document.querySelector("#item-S-1") && document.querySelector("#item-S-1 .status").textContent.includes("waiting for an answer: q1")`)
	page.waitFor(`document.querySelector("#question-q1").textContent.includes("Which colour should the button be?")`)
	// The person types; S-2 passes meanwhile and the page's items are
	// drawn anew, the field with them: what they typed, and the focus,
	// stay.
	page.typeInto("#answer-text-q1", "Blue, like the logo.")
	page.eval(`document.querySelector("#answer-text-q1").dataset.old = "1"`)
	if err := os.WriteFile(filepath.Join(flags, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	page.waitFor(`document.querySelector("#item-S-2").classList.contains("passed") && !document.querySelector("#answer-text-q1").dataset.old`)
	if v := page.eval(`document.querySelector("#answer-text-q1").value + "|" + (document.activeElement && document.activeElement.id)`); v != "Blue, like the logo.|answer-text-q1" {
		t.Fatalf("after the items were drawn anew the answer field holds %q", v)
	}
	page.click("#answer-q1")
	page.waitFor(`!!document.querySelector("#note") && document.querySelector("#note").textContent.includes("ralph answer done")`)

	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the run: %v\n%s", err, events())
		}
	case <-ctx.Done():
		t.Fatalf("the run did not end after the answer:\n%s", events())
	}
	if !strings.Contains(events(), `"type":"question_answered"`) || !strings.Contains(events(), "q1 answered by the web dashboard") {
		t.Errorf("no answer from the web dashboard in the events:\n%s", events())
	}
	// S-1's second iteration (S-2's came between).
	logs, _ := filepath.Glob(filepath.Join(p.Transcripts, "*-S-1.log"))
	if len(logs) != 2 {
		t.Fatalf("S-1's transcripts: %v", logs)
	}
	tr, _ := os.ReadFile(logs[1])
	if !strings.Contains(string(tr), "Answer: Blue, like the logo.") {
		t.Errorf("S-1's next prompt lacks the answer:\n%s", tr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "S-1.txt")); strings.TrimSpace(string(b)) != "Blue, like the logo." {
		t.Errorf("S-1.txt = %q", b)
	}
}

// stringer shows what f returns where a log is printed.
type stringer func() string

func (f stringer) String() string { return f() }
