package source

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestSetAside: of the files git ignores, those there before the run stay
// for the gates; those written since are moved out while the gates run
// and come back after; what the gates wrote stays for the next judging
// until something else changes it; ralph's own and the kept ones never
// move.
func TestSetAside(t *testing.T) {
	ctx := context.Background()
	dir, repo := newRepo(t)
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".gitignore", "node_modules/\n*.out\nlock\n")
	write("node_modules/.bin/runner", "real\n")
	tick := func() time.Time { time.Sleep(20 * time.Millisecond); return time.Now() } // past the kernel's coarse clock
	since := tick()
	tick()
	write("node_modules/.bin/runner", "fake\n") // replaced by the agent
	write("excluded.out", "x\n")
	write("lock", "ralph's\n")
	write(".ralph/state.json", "{}\n")

	var outputs gateOutputs
	set, err := setAside(ctx, repo, since, &outputs, []string{"lock"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(set.moved)
	if want := []string{"excluded.out", "node_modules/.bin/runner"}; !slices.Equal(set.moved, want) {
		t.Fatalf("set aside %v, want %v", set.moved, want)
	}
	for _, p := range []string{"excluded.out", "node_modules/.bin/runner"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Fatalf("%s still in the tree during the gates", p)
		}
	}
	tick()
	gatesFrom := outputs.clock(ctx, repo)
	tick()
	write("build.out", "made by a gate\n")
	gatesTo := outputs.clock(ctx, repo)
	outputs.gatesRan(repo.Dir, gatesFrom, gatesTo, set.moved)
	set.putBack()
	if b, _ := os.ReadFile(filepath.Join(dir, "node_modules/.bin/runner")); string(b) != "fake\n" {
		t.Fatalf("the agent's file was not put back: %q", b)
	}

	tick()
	set, err = setAside(ctx, repo, since, &outputs, []string{"lock"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(set.moved)
	if want := []string{"excluded.out", "node_modules/.bin/runner"}; !slices.Equal(set.moved, want) {
		t.Fatalf("second judging set aside %v, want %v (the gate's build.out stays)", set.moved, want)
	}
	set.putBack()

	write("build.out", "changed by the agent\n")
	set, err = setAside(ctx, repo, since, &outputs, []string{"lock"})
	if err != nil {
		t.Fatal(err)
	}
	defer set.putBack()
	if !slices.Contains(set.moved, "build.out") {
		t.Fatalf("a gate output the agent changed was not set aside: %v", set.moved)
	}
}
