package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/cluster"
)

// rogue is a client that holds the NATS token but is no worker: for every
// job a worker takes it reports a failure, once in the worker's name at
// the worker's result key and once as a worker of its own, and it sets a
// rate-limit pause until 2099. It returns how many reports it forged.
func rogue(ctx context.Context, t *testing.T, url string) <-chan int {
	forged := make(chan int, 1)
	go func() {
		forgedN := 0
		defer func() { forged <- forgedN }()
		nc, err := cluster.Connect(url, cluster.ConnOptions{Name: "rogue", Token: testToken})
		if err != nil {
			t.Error(err)
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		var claims, results, run jetstream.KeyValue
		n := cluster.NamesFor("ralph/d")
		for ctx.Err() == nil {
			claims, _ = js.KeyValue(ctx, n.Claims)
			results, _ = js.KeyValue(ctx, n.Results)
			run, _ = js.KeyValue(ctx, n.Settings)
			if claims != nil && results != nil && run != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if ctx.Err() != nil {
			return
		}
		w, err := claims.WatchAll(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var c struct {
				Worker, Proof   string
				Done, Cancelled bool
			}
			if json.Unmarshal(e.Value(), &c) != nil || c.Done || c.Cancelled || len(c.Proof) < 16 {
				continue
			}
			key := e.Key()
			if forgedN == 0 {
				// Once jobs run: every later agent start meets the pause.
				if _, err := run.Put(ctx, "ratelimit", []byte(`{"until":"2099-01-01T00:00:00Z","message":"forged","worker":"evil"}`)); err != nil {
					t.Error(err)
				}
			}
			for worker, at := range map[string]string{c.Worker: key + "." + c.Proof[:16], "evil": key + ".evil"} {
				b, _ := json.Marshal(map[string]any{"key": key, "worker": worker, "host": "rogue", "error": "forged failure", "result": map[string]any{"is_error": true, "exit_code": 1}})
				if _, err := results.Put(ctx, at, b); err == nil {
					forgedN++
				}
			}
		}
	}()
	return forged
}

// Attack: a holder of the NATS token who is no worker reports a failure
// for every job and pauses every worker until 2099. Its reports are
// ignored and shown, none is an agent failure (every story's agent runs
// once, the breaker never opens), and the pause lasts --max-pause, shown
// with its date.
func TestClusterRogueClient(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, url := clusterSetup(t, diamond(4))
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url, "--max-pause", "3s", "--breaker", "2")...)
	ctx, cancel := context.WithCancel(t.Context())
	forged := rogue(ctx, t, url)
	w1 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	w2 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	code := co.wait(t, 2*time.Minute)
	cancel()
	n := <-forged
	if code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s\n%s", code, co, w1, w2)
	}
	requireOneEach(t, remote, 4, co, w1, w2)
	if n < 8 {
		t.Fatalf("the rogue forged %d reports (want 2 for each of 4 jobs at least)", n)
	}
	starts, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
	if c := strings.Count(string(starts), "start "); c != 4 {
		t.Fatalf("%d agent runs for 4 stories (a forged failure counted?):\n%s\n%s", c, starts, co)
	}
	if !strings.Contains(co.out.String(), `from "evil": the job is`) || !strings.Contains(co.out.String(), "does not carry its claim's secret") {
		t.Fatalf("the forged reports were not shown:\n%s", co)
	}
	logs := w1.out.String() + w2.out.String()
	if !strings.Contains(logs, "not 2099-01-01 00:00:00") || !strings.Contains(logs, "pauses last at most 3s") {
		t.Fatalf("the forged pause was not bounded, or not shown with its date:\n%s\n%s\n%s", w1, w2, co)
	}
}

// Attack: someone with push access to the git remote replaces a worker's
// commit on refs/ralph/jobs/ after the worker pushed (a hook on the
// remote does it, once, for S-2's first job). The coordinator fetches
// only the commit the worker reported: the rogue commit is never merged,
// S-2's job runs again, and the job refs leave the remote once taken.
func TestClusterRogueCommit(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, url := clusterSetup(t, diamond(3))
	hook := `#!/bin/sh
while read old new ref; do
	case "$ref" in refs/ralph/jobs/*-S-2/*)
		if mkdir "$MARK/rogue-done" 2>/dev/null; then
			blob=$(echo rogue | git hash-object -w --stdin)
			tree=$( (git ls-tree "$new"; printf '100644 blob %s\trogue.txt\n' "$blob") | git mktree)
			c=$(git commit-tree "$tree" -p "$new^" -m "feat: rogue")
			git update-ref "$ref" "$c"
		fi ;;
	esac
done
`
	os.WriteFile(filepath.Join(remote, "hooks", "post-receive"), []byte(hook), 0o755)
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url)...)
	w := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s", code, co, w)
	}
	requireOneEach(t, remote, 3, co, w)
	if _, err := os.Stat(filepath.Join(mark, "rogue-done")); err != nil {
		t.Fatal("the remote's hook never replaced a commit")
	}
	if files := git(t, remote, "ls-tree", "-r", "--name-only", "ralph/d"); strings.Contains(files, "rogue.txt") {
		t.Fatalf("the rogue commit was merged:\n%s\n%s", files, co)
	}
	if !strings.Contains(co.out.String(), "someone else pushed there") {
		t.Fatalf("the replaced commit was not reported:\n%s", co)
	}
	starts, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
	if c := strings.Count(string(starts), "start S-2 "); c != 2 {
		t.Fatalf("S-2 ran %d times (want 2):\n%s", c, starts)
	}
	if refs := git(t, remote, "for-each-ref", "refs/ralph/"); strings.TrimSpace(refs) != "" {
		t.Fatalf("job refs left on the remote:\n%s", refs)
	}
}

// With no worker, a job waits --queue-timeout, then the run stops saying
// so, and leaves nothing queued on the remote; --parallel 1 is what it
// says.
func TestClusterQueueTimeout(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, url := clusterSetup(t, diamond(3))
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url, "--parallel", "1", "--queue-timeout", "6s")...)
	// ralph status tells the queued job from a running one.
	waitFor(t, func() bool {
		st := runBin(t, repo, "", nil, bin, "status")
		return strings.Contains(st.stdout, "## Jobs") && strings.Contains(st.stdout, "| queued | — |")
	}, co)
	code := co.wait(t, time.Minute)
	if code == 0 || !strings.Contains(co.out.String(), "no worker took the job within --queue-timeout 6s") {
		t.Fatalf("coordinator exit %d\n%s", code, co)
	}
	if refs := git(t, remote, "for-each-ref", "refs/ralph/"); strings.TrimSpace(refs) != "" {
		t.Fatalf("job refs left on the remote:\n%s", refs)
	}
	// Run again with a worker: --parallel 1 runs one job at a time.
	co = startBg(t, repo, env, bin, coordinatorArgs(remote, url, "--parallel", "1")...)
	w := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "3")
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s", code, co, w)
	}
	requireOneEach(t, remote, 3, co, w)
}
