package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A child that left the process group (setsid) survives the group kill at
// the end of Run; KillTagged finds it by the iteration's tag, kills it and
// reaps it, and leaves processes of another tag alone.
func TestKillTaggedFindsEscapedChildren(t *testing.T) {
	if !BecomeSubreaper() {
		t.Skip("no PR_SET_CHILD_SUBREAPER here")
	}
	dir := t.TempDir()
	start := func(tag, name string) int {
		t.Helper()
		pidFile := filepath.Join(dir, name)
		ctx := WithTag(context.Background(), TagEnv+"="+tag)
		script := "setsid sh -c 'echo $$ > " + pidFile + "; exec sleep 60' >/dev/null 2>&1 & sleep 0.3"
		if _, err := (Exec{}).Run(ctx, Cmd{Argv: []string{"sh", "-c", script}}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) != "" {
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				return pid
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("the escaped child never started")
		return 0
	}
	mine := start("run/1", "mine.pid")
	other := start("run/2", "other.pid")
	t.Cleanup(func() { KillTagged(TagEnv+"=run/2", false) })
	if !Alive(mine) || !Alive(other) {
		t.Fatal("the escaped children should outlive Run's group kill")
	}
	killed := KillTagged(TagEnv+"=run/1", false)
	if len(killed) != 1 || killed[0] != mine {
		t.Fatalf("killed %v, want [%d]", killed, mine)
	}
	if Alive(mine) {
		t.Fatal("the tagged child still runs")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(mine)); err == nil {
		t.Fatal("the tagged child was not reaped (a zombie is left)")
	}
	if !Alive(other) {
		t.Fatal("another iteration's process was killed")
	}
}

// TestDescendantsFindsGrandchildren checks the children-list walk against
// the whole-table one: a grandchild started in the background is found.
func TestDescendantsFindsGrandchildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	self := os.Getpid()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		kids, ok := descendants(self)
		if !ok {
			t.Skip("the kernel has no children lists")
		}
		procs := table()
		want := 0
		for pid, p := range procs {
			if pid != self && p.alive && descends(procs, pid, self) {
				want++
			}
		}
		if len(kids) >= 2 && len(kids) == want {
			return
		}
	}
	t.Fatal("descendants never found the shell and its sleep")
}
