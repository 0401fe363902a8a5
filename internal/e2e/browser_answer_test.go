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
// person types the answer into the page and sends it, and the story's
// next iteration has it in its prompt. The answer is recorded as the web
// dashboard's.
func TestBrowserAnswer(t *testing.T) {
	self, _ := os.Executable()
	dir := newRepo(t, map[string]string{
		"prd.json": `{"project":"web","branch_name":"ralph/web","quality_checks":{"test":"true"},"user_stories":[{"id":"S-1","title":"a button","priority":1,"checks":["test -f S-1.txt"]}]}`,
		"agent.sh": `prompt=$(cat)
if echo "$prompt" | grep -q '  Answer: '; then
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

	run := exec.CommandContext(ctx, self, "run", "--plain", "--no-sandbox", "--agent", "cmd", "--agent-cmd", "sh agent.sh")
	run.Dir, run.Env = dir, env
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Process.Kill(); _ = run.Wait() }()
	events := func() string { b, _ := os.ReadFile(p.Events); return string(b) }
	waitFor(t, func() bool { return strings.Contains(events(), `"type":"awaiting_answer"`) })

	page := startChromium(ctx, t)
	page.open(url)
	page.waitFor(`!!document.querySelector("#item-S-1") && document.querySelector("#item-S-1 .status").textContent.includes("waiting for an answer: q1")`)
	page.waitFor(`document.querySelector("#question-q1").textContent.includes("Which colour should the button be?")`)
	page.click("#answer-text-q1")
	page.typeText("Blue, like the logo.")
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
	tr, _ := os.ReadFile(filepath.Join(p.Transcripts, "0002-S-1.log"))
	if !strings.Contains(string(tr), "Answer: Blue, like the logo.") {
		t.Errorf("S-1's next prompt lacks the answer:\n%s", tr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "S-1.txt")); strings.TrimSpace(string(b)) != "Blue, like the logo." {
		t.Errorf("S-1.txt = %q", b)
	}
}
