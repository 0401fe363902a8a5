package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
)

// memoryEngine is an engine with a 300-token progress budget and sum as
// its summariser, its state box ready (no run).
func memoryEngine(t *testing.T, sum agent.Agent) (*Engine, Paths) {
	e, p := newTestEngine(t, &fakeSource{items: oneStory()}, &funcAgent{}, func(c *Config) {
		c.Progress.Budget = 300
		c.Progress.Summarizer = sum
	})
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.box = newStateBox(&State{RunID: "r"}, p.State, time.Now)
	return e, p
}

func entry(i int) string {
	return fmt.Sprintf("\n## 2026-01-01T00:00:00Z · story S-%d · iteration %d · passed\n\n- Learnings:\n  - L-%d %s\n", i, i, i, strings.Repeat("x", 80))
}

// The digest is the patterns section and the newest entries within the
// window, never an entry cut in two, never the patterns twice.
func TestDigestPatternsAndWindow(t *testing.T) {
	p := filepath.Join(t.TempDir(), "progress.md")
	body := patternsHeading + "\n\n- L-1 and L-2 hold\n\n" + patternsEnd
	for i := 3; i <= 40; i++ {
		body += entry(i)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newMemory(300) // 300 bytes of patterns, a 900-byte window
	d := m.digest(p)
	if !strings.HasPrefix(d, patternsHeading+" (summarised from earlier entries)\n\n- L-1 and L-2 hold\n\n## 2026") {
		t.Fatalf("digest starts %q", d[:min(len(d), 120)])
	}
	if !strings.Contains(d, "L-40 ") || strings.Contains(d, "L-3 ") || len(d) > 300+900+64 {
		t.Fatalf("digest of %d bytes:\n%s", len(d), d)
	}
	if strings.Count(d, patternsHeading) != 1 || strings.Contains(d, patternsEnd) {
		t.Fatalf("patterns twice or the marker shown:\n%s", d)
	}
}

// A compaction folds the entries older than the window into the patterns
// through the summariser, archives them raw (once, even when a crash
// repeats it), and keeps the newest entries; every entry stays on disk.
func TestCompactProgress(t *testing.T) {
	var prompts []string
	sum := &funcAgent{reply: func(req agent.Request) agent.Result {
		prompts = append(prompts, req.Prompt)
		return agent.Result{FinalText: fmt.Sprintf("- summary %d", len(prompts))}
	}}
	e, p := memoryEngine(t, sum)
	for i := 1; i <= 20; i++ {
		e.logProgress([]byte(entry(i)))
		e.compactProgress(context.Background())
	}
	if len(prompts) < 2 {
		t.Fatalf("%d compactions after 20 entries of 150 bytes over a 900-byte window", len(prompts))
	}
	if !strings.Contains(prompts[1], "- summary 1") {
		t.Fatalf("the second compaction does not build on the first summary:\n%s", prompts[1])
	}
	if !strings.Contains(prompts[0], "L-1 ") || !strings.Contains(prompts[0], "(none yet)") {
		t.Fatalf("first summariser prompt:\n%s", prompts[0])
	}
	b, _ := os.ReadFile(p.Progress)
	a, _ := os.ReadFile(archivePath(p.Progress))
	if !strings.HasPrefix(string(b), patternsHeading+"\n\n- summary ") || strings.Contains(string(b), "L-1 ") || !strings.Contains(string(b), "L-20 ") {
		t.Fatalf("progress.md:\n%s", b)
	}
	for i := 1; i <= 20; i++ {
		n := strings.Count(string(a)+string(b), fmt.Sprintf("L-%d ", i))
		if n != 1 {
			t.Errorf("L-%d is %d times in progress.md and the archive", i, n)
		}
	}
	// The same entries archived again (a crash after the archive, before
	// the rewrite): written once.
	before, _ := os.ReadFile(archivePath(p.Progress))
	chunk := entry(1) + entry(2)
	if err := archiveEntries(archivePath(p.Progress), chunk); err != nil {
		t.Fatal(err)
	}
	if err := archiveEntries(archivePath(p.Progress), chunk); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(archivePath(p.Progress))
	if strings.Count(string(after[len(before):]), "L-1 ") != 1 {
		t.Fatalf("archived twice:\n%s", after[len(before):])
	}
}

// A summariser that fails leaves the file as it was and is not asked
// again until the entries grew by another half window.
func TestCompactProgressFailure(t *testing.T) {
	calls := 0
	sum := &funcAgent{reply: func(agent.Request) agent.Result {
		calls++
		return agent.Result{ExitCode: 1, ErrorText: "boom"}
	}}
	e, p := memoryEngine(t, sum)
	for i := 1; i <= 12; i++ {
		e.logProgress([]byte(entry(i)))
		e.compactProgress(context.Background())
	}
	b, _ := os.ReadFile(p.Progress)
	if strings.Contains(string(b), patternsHeading) || strings.Count(string(b), "\n## ") != 12 {
		t.Fatalf("progress.md changed by a failed compaction:\n%s", b)
	}
	if calls < 2 || calls > 4 {
		t.Fatalf("the failing summariser was asked %d times for 12 entries", calls)
	}
	if _, err := os.Stat(archivePath(p.Progress)); err == nil {
		t.Fatal("an archive without a compaction")
	}
}
