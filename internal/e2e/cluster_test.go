package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/testenv"
)

// The distributed backend with real processes: a coordinator with its
// embedded NATS server, worker processes, a bare git remote in a temp
// folder, all on loopback, and a shell agent.

// clusterAgent writes its story's file and claims; $MARK is a folder outside
// every repository where it leaves what the test looks at.
const clusterAgent = `cat > /dev/null
echo "start $RALPH_ITEM_ID $(date +%s%N) $PPID" >> "$MARK/starts.log"
if [ -f "$MARK/hook.sh" ]; then . "$MARK/hook.sh"; fi
echo "$RALPH_ITEM_ID" > "out-$RALPH_ITEM_ID.txt"
echo '<promise>COMPLETE</promise>'
`

// testToken is the NATS token of the tests' coordinators and workers,
// given the way the README says: in $RALPH_NATS_TOKEN.
const testToken = "e2e-nats-token-0123456789"

var natsTokenEnv = "RALPH_NATS_TOKEN=" + testToken

// bgProc is a background ralph process with its output.
type bgProc struct {
	cmd *exec.Cmd
	out *testenv.LockedBuffer
}

func startBg(t *testing.T, dir string, env []string, bin string, args ...string) *bgProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=ralph e2e", "GIT_AUTHOR_EMAIL=e2e@example.com",
		"GIT_COMMITTER_NAME=ralph e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &bgProc{cmd: cmd, out: &testenv.LockedBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return p
}

// dumpStacks has a ralph process that seems stuck print its goroutines
// (Go does on SIGQUIT, and exits) into its output.
func (p *bgProc) dumpStacks() {
	if p.cmd.ProcessState != nil {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return
	}
	for i := 0; i < 40 && !strings.Contains(p.out.String(), "goroutine "); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
}

// wait waits for the process to exit and returns its exit code.
func (p *bgProc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(limit):
		t.Fatalf("%v did not finish in %s\n%s", p.cmd.Args, limit, p.out)
		return -1
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// clusterSetup makes the repository (on main, pushed to a bare remote) with
// prd and the agent, and returns it, the remote, the mark folder and the
// NATS URL to use.
func clusterSetup(t *testing.T, prd string) (repo, remote, mark, url string) {
	return clusterRepo(t, map[string]string{"prd.json": prd, "agent.sh": clusterAgent})
}

// clusterRepo is clusterSetup with the repository's files given.
func clusterRepo(t *testing.T, files map[string]string) (repo, remote, mark, url string) {
	needEmbeddedServer(t)
	repo = newRepo(t, files)
	remote = filepath.Join(t.TempDir(), "remote.git")
	git(t, repo, "init", "-q", "--bare", remote)
	git(t, repo, "push", "-q", remote, "main")
	mark = t.TempDir()
	return repo, remote, mark, fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
}

func coordinatorArgs(remote, url string, extra ...string) []string {
	addr := strings.TrimPrefix(url, "nats://")
	return append([]string{"coordinator", "--prd", "prd.json", "--remote", remote, "--listen", addr,
		"--agent", "cmd", "--agent-cmd", "sh agent.sh", "--lease", "2s", "--iteration-timeout", "2m"}, extra...)
}

// diamond is S-1, then S-2…S-(n-1) on it, then S-n on all of those.
func diamond(n int) string {
	var s []string
	s = append(s, `{"id":"S-1","title":"root","priority":1,"checks":["test -f out-S-1.txt"]}`)
	var mid []string
	for i := 2; i < n; i++ {
		s = append(s, fmt.Sprintf(`{"id":"S-%d","title":"middle %d","priority":2,"depends_on":["S-1"],"checks":["test -f out-S-%d.txt"]}`, i, i, i))
		mid = append(mid, strconv.Quote(fmt.Sprintf("S-%d", i)))
	}
	s = append(s, fmt.Sprintf(`{"id":"S-%d","title":"top","priority":3,"depends_on":[%s],"checks":["test -f out-S-%d.txt"]}`, n, strings.Join(mid, ","), n))
	return `{"project":"d","branch_name":"ralph/d","user_stories":[` + strings.Join(s, ",\n") + `],"quality_checks":{"test":"test -f agent.sh"}}` + "\n"
}

// featCommits counts the feat commits per story on the remote's feature
// branch.
func featCommits(t *testing.T, remote string) map[string]int {
	out := git(t, remote, "log", "--format=%s", "ralph/d")
	got := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "feat(") {
			got[strings.TrimPrefix(strings.SplitN(l, ")", 2)[0], "feat(")]++
		}
	}
	return got
}

func requireOneEach(t *testing.T, remote string, n int, logs ...fmt.Stringer) {
	t.Helper()
	got := featCommits(t, remote)
	for i := 1; i <= n; i++ {
		if id := fmt.Sprintf("S-%d", i); got[id] != 1 {
			var b strings.Builder
			for _, l := range logs {
				b.WriteString(l.String() + "\n---\n")
			}
			t.Fatalf("%s has %d feat commits on the remote (want 1): %v\n%s", id, got[id], got, b.String())
		}
	}
}

func (p *bgProc) String() string { return strings.Join(p.cmd.Args, " ") + ":\n" + p.out.String() }

// Three workers finish an 8-story diamond: one feat commit per story, on
// the remote. The first worker starts before the coordinator and waits.
func TestClusterDiamondThreeWorkers(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, url := clusterSetup(t, diamond(8))
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	w1dir := t.TempDir()
	w1 := startBg(t, w1dir, env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	waitFor(t, func() bool { return strings.Contains(w1.out.String(), "waiting for a coordinator") })
	// A second worker in the same folder would share its trees: refused.
	if r := runBin(t, w1dir, "", env, bin, "worker", "--nats", url, "--dir", "w"); r.code != 2 || !strings.Contains(r.stderr, "in use by another worker, pid") {
		t.Fatalf("a second worker in w1's --dir: exit %d\n%s", r.code, r.stderr)
	}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url)...)
	w2 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	w3 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s\n%s\n%s", code, co, w1, w2, w3)
	}
	requireOneEach(t, remote, 8, co, w1, w2, w3)
	if !strings.Contains(co.out.String(), "start workers with: ralph worker --nats "+url) {
		t.Fatalf("the coordinator did not print the workers' URL:\n%s", co)
	}
	starts, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
	if n := strings.Count(string(starts), "start "); n != 8 {
		t.Fatalf("%d agent runs for 8 stories:\n%s", n, starts)
	}
	// Only the branches remain on the remote: every job's refs left it.
	if refs := git(t, remote, "for-each-ref", "--format=%(refname)"); strings.TrimSpace(refs) != "refs/heads/main\nrefs/heads/ralph/d" {
		t.Fatalf("the remote's refs after the run:\n%s", refs)
	}
	// The repository's own tree is the feature branch, clean.
	if st := git(t, repo, "status", "--porcelain", "--untracked-files=no"); st != "" {
		t.Fatalf("the coordinator's tree is dirty:\n%s", st)
	}
}

// A worker killed with SIGKILL in the middle of a story: its job goes to
// another worker when the lease runs out, and the story is committed once.
func TestClusterWorkerKilled(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, url := clusterSetup(t, diamond(4))
	// The first run of S-2 says where it is and hangs.
	hook := `if [ "$RALPH_ITEM_ID" = S-2 ] && [ ! -f "$MARK/s2.pid" ]; then echo "$PPID $$" > "$MARK/s2.tmp"; mv "$MARK/s2.tmp" "$MARK/s2.pid"; sleep 60; fi` + "\n"
	os.WriteFile(filepath.Join(mark, "hook.sh"), []byte(hook), 0o644)
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url)...)
	// --no-sandbox: the hook tells the worker's and its agent's pids,
	// which a sandbox's pid namespace would hide.
	w1 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--no-sandbox")
	w2 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--no-sandbox")
	var pids []byte
	waitFor(t, func() bool { pids, _ = os.ReadFile(filepath.Join(mark, "s2.pid")); return len(pids) > 0 })
	f := strings.Fields(string(pids))
	worker, _ := strconv.Atoi(f[0])
	agentPid, _ := strconv.Atoi(f[1])
	if worker != w1.cmd.Process.Pid && worker != w2.cmd.Process.Pid {
		t.Fatalf("S-2's agent's parent %d is neither worker (%d, %d)", worker, w1.cmd.Process.Pid, w2.cmd.Process.Pid)
	}
	// ralph status shows S-2's job running on its worker.
	waitFor(t, func() bool {
		st := runBin(t, repo, "", nil, bin, "status")
		_, jobs, ok := strings.Cut(st.stdout, "## Jobs")
		return ok && strings.Contains(jobs, "| S-2 | ") && strings.Contains(jobs, "| running | ")
	}, co)
	if err := syscall.Kill(worker, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Its agent (in a process group of its own) dies with it.
	waitFor(t, func() bool { return gone(agentPid) }, co, w1, w2)
	w3 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s\n%s\n%s", code, co, w1, w2, w3)
	}
	requireOneEach(t, remote, 4, co, w1, w2, w3)
	starts, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
	if n := strings.Count(string(starts), "start S-2 "); n != 2 {
		t.Fatalf("S-2's agent ran %d times (want 2: killed, then redelivered):\n%s", n, starts)
	}
}

// The coordinator killed with SIGKILL mid-run and started again: the run
// resumes (its state on disk, the stream and buckets in the embedded
// server's store) and finishes with nothing merged twice.
func TestClusterCoordinatorRestarted(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, url := clusterSetup(t, diamond(6))
	os.WriteFile(filepath.Join(mark, "hook.sh"), []byte("sleep 0.5\n"), 0o644)
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url)...)
	w1 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	w2 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	waitFor(t, func() bool { return len(featCommitsQuiet(remote)) >= 2 }, co, w1, w2)
	// ralph status, a reader, shows the remote workers while the run lasts.
	var st runResult
	waitFor(t, func() bool {
		st = runBin(t, repo, "", nil, bin, "status")
		_, workers, ok := strings.Cut(st.stdout, "## Workers")
		return ok && strings.Count(workers, "| 2 | ") == 2 // two workers of 2 slots
	}, co, w1, w2)
	_ = syscall.Kill(-co.cmd.Process.Pid, syscall.SIGKILL)
	co.wait(t, 30*time.Second)
	co2 := startBg(t, repo, env, bin, coordinatorArgs(remote, url)...)
	if code := co2.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("restarted coordinator exit %d\n%s\n%s\n%s\n%s", code, co, co2, w1, w2)
	}
	requireOneEach(t, remote, 6, co, co2, w1, w2)
	if !strings.Contains(co2.out.String(), "resum") {
		t.Fatalf("the second coordinator did not resume the run:\n%s", co2)
	}
}

// A coordinator that dies for good is replaced by one on another machine:
// a fresh clone of the remote and the same NATS server (a standalone one
// here). It takes the run's state from NATS and the feature branch from
// the remote, and finishes without running a merged story again.
func TestClusterCoordinatorMoves(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, _ := clusterSetup(t, diamond(6))
	srv, url, err := cluster.StartServer("127.0.0.1:0", t.TempDir(), cluster.ServerAuth{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	os.WriteFile(filepath.Join(mark, "hook.sh"), []byte("sleep 0.5\n"), 0o644)
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	args := []string{"coordinator", "--prd", "prd.json", "--remote", remote, "--nats", url,
		"--agent", "cmd", "--agent-cmd", "sh agent.sh", "--lease", "2s", "--iteration-timeout", "2m"}
	co := startBg(t, repo, env, bin, args...)
	w1 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	w2 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	// Two stories merged, pushed, and in the state on NATS.
	nc, err := cluster.Connect(url, cluster.ConnOptions{Name: "test", Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var merged []string
	waitFor(t, func() bool {
		kv, err := js.KeyValue(t.Context(), cluster.NamesFor("ralph/d").Settings)
		if err != nil {
			return false
		}
		e, err := kv.Get(t.Context(), cluster.KeyState)
		if err != nil {
			return false
		}
		var st struct {
			Items map[string]struct {
				Status string `json:"status"`
			} `json:"items"`
		}
		json.Unmarshal(e.Value(), &st)
		merged = merged[:0]
		for id, it := range st.Items {
			if it.Status == "passed" {
				merged = append(merged, id)
			}
		}
		return len(merged) >= 2 && len(featCommitsQuiet(remote)) >= len(merged)
	})
	_ = syscall.Kill(-co.cmd.Process.Pid, syscall.SIGKILL)
	co.wait(t, 30*time.Second)
	elsewhere := filepath.Join(t.TempDir(), "clone")
	git(t, t.TempDir(), "clone", "-q", "-b", "main", remote, elsewhere)
	co2 := startBg(t, elsewhere, env, bin, args...)
	if code := co2.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the new coordinator exit %d\n%s\n%s\n%s\n%s", code, co, co2, w1, w2)
	}
	requireOneEach(t, remote, 6, co, co2, w1, w2)
	if !strings.Contains(co2.out.String(), "resuming run") {
		t.Fatalf("the new coordinator did not take the run up from NATS:\n%s", co2)
	}
	starts, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
	for _, id := range merged {
		if n := strings.Count(string(starts), "start "+id+" "); n != 1 {
			t.Fatalf("%s, merged before the coordinator died, ran %d times:\n%s\n%s", id, n, starts, co2)
		}
	}
}

// gone reports whether pid no longer runs (a zombie nobody reaped yet
// counts as gone).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

func featCommitsQuiet(remote string) []string {
	out, err := exec.Command("git", "-C", remote, "log", "--format=%s", "ralph/d").Output()
	if err != nil {
		return nil
	}
	var feats []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "feat(") {
			feats = append(feats, l)
		}
	}
	return feats
}

// rateLimitedRun runs prd on two workers of one slot with hook sourced by
// every agent ($MARK and $REMOTE set), a 3 s rate-limit backoff; it
// returns when the limit was met (the hook writes $MARK/limited), the
// agents' starts and the workers.
func rateLimitedRun(t *testing.T, bin, prd, hook string, args ...string) (limited int64, starts string, w1, w2 *bgProc) {
	t.Helper()
	repo, remote, mark, url := clusterSetup(t, prd)
	os.WriteFile(filepath.Join(mark, "hook.sh"), []byte(hook), 0o644)
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark, remote), "REMOTE=" + remote}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url, append(args, "--rate-limit-backoff", "3s")...)...)
	w1 = startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	w2 = startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s\n%s", code, co, w1, w2)
	}
	requireOneEach(t, remote, 4, co, w1, w2)
	b, _ := os.ReadFile(filepath.Join(mark, "limited"))
	limited, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	st, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
	return limited, string(st), w1, w2
}

// A rate limit one worker's agent meets pauses the other worker's next
// agent start until the reset.
func TestClusterRateLimitPausesEveryWorker(t *testing.T) {
	bin := buildRalph(t)
	prd := `{"project":"d","branch_name":"ralph/d","user_stories":[
{"id":"S-1","title":"a","priority":1,"checks":["test -f out-S-1.txt"]},{"id":"S-2","title":"b","priority":1,"checks":["test -f out-S-2.txt"]},
{"id":"S-3","title":"c","priority":2,"depends_on":["S-2"],"checks":["test -f out-S-3.txt"]},{"id":"S-4","title":"d","priority":2,"depends_on":["S-2"],"checks":["test -f out-S-4.txt"]}],"quality_checks":{"test":"test -f agent.sh"}}`
	// S-1 meets the limit at once; S-2 takes a second, so S-3 and S-4
	// (after S-2) start after the pause is in force.
	hook := `if [ "$RALPH_ITEM_ID" = S-1 ] && [ ! -f "$MARK/limited" ]; then date +%s%N > "$MARK/limited"; echo 'RALPH_RATE_LIMIT: 3 usage limit reached'; exit 0; fi
if [ "$RALPH_ITEM_ID" = S-2 ]; then sleep 1; fi` + "\n"
	limited, starts, w1, w2 := rateLimitedRun(t, bin, prd, hook)
	after := 0
	for _, l := range strings.Split(strings.TrimSpace(starts), "\n") {
		f := strings.Fields(l)
		at, _ := strconv.ParseInt(f[2], 10, 64)
		if at-limited < int64(300*time.Millisecond) {
			continue // began with the limited agent, before its worker could publish the pause
		}
		after++
		if d := time.Duration(at - limited); d < 2500*time.Millisecond {
			t.Fatalf("%s started %s after the rate limit (reset in 3s)\n%s\n%s\n%s", f[1], d, starts, w1, w2)
		}
	}
	if after < 2 { // S-1 again, S-3 and S-4 (after S-2)
		t.Fatalf("only %d agent starts after the limit:\n%s", after, starts)
	}
	if !strings.Contains(w1.out.String()+w2.out.String(), "every worker's next agent waits until") {
		t.Fatalf("no worker published the pause:\n%s\n%s", w1, w2)
	}
}

// The pause is the workers' own, not only the coordinator's: jobs queued
// before the limit was met are held by the worker that takes them. Four
// independent stories are queued at once for two workers of one slot; the
// first agent meets the limit once all four are queued, the other takes a
// second, so both workers' next jobs are already in the queue.
func TestClusterRateLimitHoldsQueuedJobs(t *testing.T) {
	bin := buildRalph(t)
	prd := `{"project":"d","branch_name":"ralph/d","user_stories":[
{"id":"S-1","title":"a","priority":1,"checks":["test -f out-S-1.txt"]},{"id":"S-2","title":"b","priority":1,"checks":["test -f out-S-2.txt"]},
{"id":"S-3","title":"c","priority":1,"checks":["test -f out-S-3.txt"]},{"id":"S-4","title":"d","priority":1,"checks":["test -f out-S-4.txt"]}],"quality_checks":{"test":"test -f agent.sh"}}`
	hook := `if mkdir "$MARK/first" 2>/dev/null; then
	while [ "$(git ls-remote "$REMOTE" 'refs/ralph/bases/*' | wc -l)" -lt 4 ]; do sleep 0.05; done
	sleep 0.3
	date +%s%N > "$MARK/limited"; echo 'RALPH_RATE_LIMIT: 3 usage limit reached'; exit 0
fi
[ -f "$MARK/limited" ] || sleep 1` + "\n"
	limited, starts, w1, w2 := rateLimitedRun(t, bin, prd, hook, "--parallel", "4")
	early, late := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(starts), "\n") {
		at, _ := strconv.ParseInt(strings.Fields(l)[2], 10, 64)
		switch d := time.Duration(at - limited); {
		case d < 0:
			early++ // the limited agent and the one beside it
		case d < 2500*time.Millisecond:
			t.Fatalf("an agent started %s after the rate limit (reset in 3s)\n%s\n%s\n%s", d, starts, w1, w2)
		default:
			late++
		}
	}
	if early != 2 || late != 3 { // S-1's retry, and the two queued stories
		t.Fatalf("%d agent starts before the limit (want 2), %d after (want 3):\n%s\n%s\n%s", early, late, starts, w1, w2)
	}
	if n := strings.Count(w1.out.String()+w2.out.String(), "hit a rate limit"); n < 2 {
		t.Fatalf("%d workers waited for the shared pause (want both):\n%s\n%s", n, w1, w2)
	}
}

// A task tree on workers: the agents run `ralph task split` and `ralph
// task complete` in the worker's copy of tasks.jsonl, and their edits come
// back merged with a task a person added on the coordinator meanwhile.
// Every leaf ends as one squash commit on the remote's main, archived here.
func TestClusterTasks(t *testing.T) {
	bin := buildRalph(t)
	const agentSh = `cat > /dev/null
echo "start $RALPH_ITEM_ID" >> "$MARK/starts.log"
case "$RALPH_ITEM_ID" in
A.1) ralph task split A.1 "part one" "part two" ;;
*)
	if [ "$RALPH_ITEM_ID" = A.2 ]; then
		while [ ! -f "$MARK/go" ]; do sleep 0.05; done
	fi
	echo "$RALPH_ITEM_ID" > "out-$RALPH_ITEM_ID.txt"
	ralph task complete "$RALPH_ITEM_ID" ;;
esac
`
	repo, remote, mark, url := clusterRepo(t, map[string]string{"agent.sh": agentSh, "tasks.jsonl": `{"id":"A","title":"auth","status":"pending","leaf":false}
{"id":"A.1","title":"session store","status":"pending","leaf":true}
{"id":"A.2","title":"login endpoint","status":"pending","leaf":true}
{"id":"B","title":"docs","status":"pending","leaf":true}
`})
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	// The remote as a path relative to the repository, as people type it.
	rel, err := filepath.Rel(repo, remote)
	if err != nil {
		t.Fatal(err)
	}
	co := startBg(t, repo, env, bin, "coordinator", "--tasks", "tasks.jsonl", "--remote", rel, "--listen", strings.TrimPrefix(url, "nats://"),
		"--agent", "cmd", "--agent-cmd", "sh agent.sh", "--lease", "2s", "--iteration-timeout", "2m",
		"--gate", "a11=test -f out-A.1.1.txt", "--gate", "a12=test -f out-A.1.2.txt", "--gate", "a2=test -f out-A.2.txt",
		"--gate", "b=test -f out-B.txt", "--gate", "c=test -f out-C.txt")
	w1 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	w2 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	// While A.2's agent works on a worker, a person adds a task here.
	waitFor(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
		return strings.Contains(string(b), "start A.2")
	})
	if r := runBin(t, repo, "", nil, bin, "task", "add", "added while A.2 ran"); r.code != 0 || strings.TrimSpace(r.stdout) != "C" {
		t.Fatalf("ralph task add: %d\n%s", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(mark, "go"), nil, 0o644)
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s\n%s", code, co, w1, w2)
	}
	logs := []fmt.Stringer{co, w1, w2}
	dump := func() string {
		var b strings.Builder
		for _, l := range logs {
			b.WriteString(l.String() + "\n---\n")
		}
		return b.String()
	}
	// One squash commit per leaf on the remote's main, the added task's too.
	subjects := git(t, remote, "log", "--format=%s", "main")
	for _, want := range []string{"[A.1.1] part one", "[A.1.2] part two", "[A.2] login endpoint", "[B] docs", "added while A.2 ran"} {
		if n := strings.Count(subjects, want); n != 1 {
			t.Fatalf("%q is on the remote's main %d times (want 1):\n%s\n%s", want, n, subjects, dump())
		}
	}
	// The task files never entered a task's commit.
	if files := git(t, remote, "log", "--format=", "--name-only", "main", "--", "tasks.jsonl", "tasks-done.jsonl"); strings.TrimSpace(files) != "tasks.jsonl" {
		t.Fatalf("task commits touched the task files:\n%s", files)
	}
	// Every task is archived here with its commit; none is left open.
	if r := runBin(t, repo, "", nil, bin, "task", "list", "--json"); r.code != 0 || strings.Contains(r.stdout, `"status":"pending"`) || strings.Contains(r.stdout, `"status":"active"`) {
		t.Fatalf("tasks left open (%d):\n%s\n%s", r.code, r.stdout, dump())
	}
	done, _ := os.ReadFile(filepath.Join(repo, "tasks-done.jsonl"))
	n := 0
	for _, l := range strings.Split(string(done), "\n") {
		if strings.Contains(l, `"leaf":true`) && strings.Contains(l, `"commit":"`) {
			n++
		}
	}
	if n != 5 {
		t.Fatalf("%d tasks archived with a commit (want 5 leaves):\n%s", n, done)
	}
	starts, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
	if n := strings.Count(string(starts), "start "); n != 6 {
		t.Fatalf("%d agent runs (want 6: A.1 split, then one per leaf):\n%s", n, starts)
	}
}

// A story's gates run on the worker, on the commit it pushes; the
// coordinator uses their results for that exact tree, and runs the gates
// itself only on a tree a worker did not judge (a story merged onto the
// stories ahead of it in the merge queue). A failing gate on the
// worker sends the story back with its output; an agent that rewrites the
// gate script so it passes is caught by the coordinator's check of the
// gates' files all the same.
func TestClusterGatesOnWorkers(t *testing.T) {
	bin := buildRalph(t)
	const agentSh = `cat > /dev/null
echo "start $RALPH_ITEM_ID $(date +%s%N) $PPID" >> "$MARK/starts.log"
n=$(grep -c "start $RALPH_ITEM_ID " "$MARK/starts.log")
if [ "$RALPH_ITEM_ID" = S-2 ] && [ "$n" = 1 ]; then
	echo BROKEN > out-S-2.txt
elif [ "$RALPH_ITEM_ID" = S-3 ] && [ "$n" = 1 ]; then
	echo 'exit 0' > check.sh
	echo BROKEN > out-S-3.txt
else
	echo "$RALPH_ITEM_ID" > "out-$RALPH_ITEM_ID.txt"
fi
echo '<promise>COMPLETE</promise>'
`
	const checkSh = `echo "$PWD" $(for f in out-*.txt; do [ -f "$f" ] && echo "$f=$(cat "$f")"; done) >> "$MARK/gates.log"
! grep -qs BROKEN out-*.txt
`
	prd := `{"project":"d","branch_name":"ralph/d","user_stories":[
{"id":"S-1","title":"a","priority":1,"checks":["test -f out-S-1.txt"]},{"id":"S-2","title":"b","priority":1,"checks":["test -f out-S-2.txt"]},{"id":"S-3","title":"c","priority":1,"checks":["test -f out-S-3.txt"]}],
"quality_checks":{"test":"sh check.sh"}}` + "\n"
	repo, remote, mark, url := clusterRepo(t, map[string]string{"prd.json": prd, "agent.sh": agentSh, "check.sh": checkSh})
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url)...)
	w1 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	w2 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w")
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s\n%s", code, co, w1, w2)
	}
	requireOneEach(t, remote, 3, co, w1, w2)
	starts, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
	for id, want := range map[string]int{"S-1": 1, "S-2": 2, "S-3": 2} {
		if n := strings.Count(string(starts), "start "+id+" "); n != want {
			t.Fatalf("%s ran %d times (want %d)\n%s\n%s", id, n, want, starts, co)
		}
	}
	if !strings.Contains(co.out.String(), "the agent changed check.sh, which the gates run; restored") {
		t.Fatalf("the rewritten gate script was not caught:\n%s", co)
	}
	// Each line of the log is where a gate ran and the stories' files it
	// saw. The coordinator's gates run on the judge's checkouts, which the
	// sandbox shows at the repository's path.
	log, _ := os.ReadFile(filepath.Join(mark, "gates.log"))
	onWorkers, restored, merged := 0, 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		f := strings.Fields(line)
		switch dir := f[0]; {
		case strings.Contains(dir, "/w/slot-"):
			onWorkers++
		case dir != repo && !strings.HasPrefix(dir, filepath.Join(repo, ".ralph", "judge", "trees")+"/"):
			t.Errorf("a gate ran in %s, neither on a worker nor in the coordinator's checkouts", dir)
		case len(f) == 1:
			// the run-wide gates on a base, before any story's work
		case slices.Contains(f, "out-S-3.txt=BROKEN"):
			restored++
		case len(f) == 2:
			t.Errorf("the coordinator ran the gates on a story's tree a worker judged: %s", line)
		default:
			merged++
		}
	}
	// On workers: S-1, S-2 twice, S-3's second attempt (its first ran the
	// agent's rewritten script, which logs nothing). Here: S-3's first
	// attempt, on the restored script (the worker's results were not for
	// that tree), alone or merged onto a story that landed first; and the
	// stories merged onto others (in the merge queue), a tree no worker
	// judged, at most once per attempt judged (five). A story cut at the
	// queue's end lands as the worker judged it.
	if onWorkers != 4 || restored < 1 || restored+merged > 5 {
		t.Fatalf("gates ran %d times on workers (want 4), %d on S-3's first attempt here (want 1 at least) and %d on other merged trees (at most 5 in all):\n%s\n%s", onWorkers, restored, merged, log, co)
	}
	tr, _ := filepath.Glob(filepath.Join(repo, ".ralph", "transcripts", "*S-1.log"))
	if len(tr) != 1 {
		t.Fatalf("transcripts of S-1: %v", tr)
	}
	if b, _ := os.ReadFile(tr[0]); !strings.Contains(string(b), "passed on worker") {
		t.Fatalf("S-1's transcript does not show its gates' results from the worker:\n%s", b)
	}
}
