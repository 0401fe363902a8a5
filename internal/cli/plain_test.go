package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
)

func TestPlainPrinterHeartbeatAndColour(t *testing.T) {
	var b bytes.Buffer
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	p := newPlainPrinter(&b, true)
	p.now = func() time.Time { return now }
	p.event(engine.Event{Type: "iteration_started", Item: "S-1", Iteration: 4, Message: "iteration 4/9 · S-1 one"})
	now = now.Add(10 * time.Second)
	p.beat(30 * time.Second)
	if strings.Contains(b.String(), "running") {
		t.Fatalf("a beat before the interval:\n%s", b.String())
	}
	now = now.Add(25 * time.Second)
	p.beat(30 * time.Second)
	if !strings.Contains(b.String(), "03:04:40 ralph: S-1 · iteration 4 · the agent has been running 35s\n") {
		t.Fatalf("no heartbeat:\n%s", b.String())
	}
	p.event(engine.Event{Type: "agent_finished", Item: "S-1", Message: "agent exited 0"})
	p.event(engine.Event{Type: "item_passed", Item: "S-1", Message: "S-1 passed"})
	b.Reset()
	now = now.Add(time.Minute)
	p.beat(30 * time.Second)
	if b.Len() != 0 {
		t.Fatalf("a heartbeat for a finished agent: %s", b.String())
	}
	p.event(engine.Event{Type: "item_passed", Item: "S-1", Message: "S-1 passed"})
	if !strings.Contains(b.String(), "\x1b[32mS-1 passed\x1b[0m") {
		t.Fatalf("not green: %q", b.String())
	}
	b.Reset()
	p.color = false
	p.event(engine.Event{Type: "item_passed", Item: "S-1", Message: "S-1 passed"})
	if strings.Contains(b.String(), "\x1b") {
		t.Fatalf("colour without a terminal: %q", b.String())
	}
}

func TestTerminalText(t *testing.T) {
	md := "# Ralph status\n\n- **Run:** r1\n\n| ID | Title | Status |\n|---|---|---|\n| S-1 | a \\| b | ✅ passed |\n| S-10 | long title | ⏳ pending |\n"
	got := terminalText(md)
	want := "Ralph status\n\n- Run: r1\n\nID    Title       Status\nS-1   a | b       ✅ passed\nS-10  long title  ⏳ pending\n\n"
	if got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}

// A stopped run's interrupted iterations are no worker rows.
func TestStatusNoWorkersWhenStopped(t *testing.T) {
	st := &engine.State{RunID: "r", Source: "prd", Status: engine.StatusInterrupted, Items: map[string]*engine.ItemState{},
		Current: []*engine.Current{{Item: "S-1", Iteration: 3, Phase: engine.PhaseAgent}}}
	md := statusMarkdown(st, false, nil)
	if strings.Contains(md, "| Worker |") || !strings.Contains(md, "**Interrupted:** S-1 (iteration 3, agent); `ralph run` finishes them") {
		t.Fatalf("stopped run:\n%s", md)
	}
	if md := statusMarkdown(st, true, nil); !strings.Contains(md, "| Worker |") {
		t.Fatalf("active run without worker rows:\n%s", md)
	}
}

// ralph run --help lists its flags under headings; every command has an
// example.
func TestRunHelpGroupsAndExamples(t *testing.T) {
	f := testFactory(t)
	root := newCmdRoot(f)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"run", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	last := -1
	for _, h := range []string{"Work source:", "Agent:", "Limits:", "Roles and review:", "Parallel:", "State:", "Output:"} {
		i := strings.Index(help, "\n"+h+"\n")
		if i < 0 || i < last {
			t.Fatalf("heading %q missing or out of order:\n%s", h, help)
		}
		last = i
	}
	if i := strings.Index(help, "--prd FILE"); i < strings.Index(help, "Work source:") || i > strings.Index(help, "Agent:") {
		t.Errorf("--prd is not under Work source:\n%s", help)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if s.Hidden || s.Name() == "help" || s.Name() == "completion" {
				continue
			}
			if s.Runnable() && s.Example == "" {
				t.Errorf("%s has no example", s.CommandPath())
			}
			walk(s)
		}
	}
	walk(root)
}
