package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/cluster"
)

// standaloneNATS is a NATS server of the test's own, with the tests'
// token: coordinators on "other machines" share it.
func standaloneNATS(t *testing.T) string {
	t.Helper()
	needEmbeddedServer(t)
	srv, url, err := cluster.StartServer("127.0.0.1:0", t.TempDir(), cluster.ServerAuth{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return url
}

// natsServerProcess runs a real nats-server — the module's own command,
// built from the module cache at the version go.mod pins — with
// JetStream and the tests' token, on loopback, and returns its URL.
func natsServerProcess(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nats-server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
		t.Fatalf("go build nats-server: %v\n%s", err, out)
	}
	port := freePort(t)
	srv := startBg(t, t.TempDir(), nil, bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", t.TempDir(), "--auth", testToken)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	waitFor(t, func() bool {
		nc, err := nats.Connect(url, nats.Token(testToken))
		if err != nil {
			return false
		}
		nc.Close()
		return true
	}, srv)
	// Attack: a client without the token is refused by it too.
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("the standalone server let a client in without the token")
	}
	return url
}

func natsCoordinatorArgs(remote, url string, extra ...string) []string {
	return append([]string{"coordinator", "--prd", "prd.json", "--remote", remote, "--nats", url,
		"--agent", "cmd", "--agent-cmd", "sh agent.sh", "--lease", "2s", "--iteration-timeout", "2m"}, extra...)
}

func freshClone(t *testing.T, remote string) string {
	dir := filepath.Join(t.TempDir(), "clone")
	git(t, t.TempDir(), "clone", "-q", "-b", "main", remote, dir)
	return dir
}

// requireWork checks that every story's work, not only its PRD flag, is
// on the remote's feature branch.
func requireWork(t *testing.T, remote string, n int, logs ...*bgProc) {
	t.Helper()
	files := git(t, remote, "ls-tree", "-r", "--name-only", "ralph/d")
	for i := 1; i <= n; i++ {
		if f := "out-S-" + strconv.Itoa(i) + ".txt"; !strings.Contains(files, f) {
			var b strings.Builder
			for _, l := range logs {
				b.WriteString(l.String() + "\n---\n")
			}
			t.Fatalf("%s is not on the remote's ralph/d: the story passed without its work\n%s\n%s", f, files, b.String())
		}
	}
}

// Attack: a second coordinator of the same run on the same NATS, from
// another clone, is refused, naming the first; a coordinator of another
// run shares the server without touching this run's queue; one given
// --take-over takes the run over, the first one stops, and the run ends
// with every story merged once, with its work.
func TestClusterTwoCoordinators(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, _ := clusterSetup(t, diamond(5))
	url := standaloneNATS(t)
	// The top story waits for the test's word: the first coordinator
	// cannot finish the run before the take-over.
	os.WriteFile(filepath.Join(mark, "hook.sh"), []byte(`if [ "$RALPH_ITEM_ID" = S-5 ]; then while [ ! -f "$MARK/go" ]; do sleep 0.1; done; fi
sleep 1
`), 0o644)
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark)}
	co1 := startBg(t, repo, env, bin, natsCoordinatorArgs(remote, url)...)
	waitFor(t, func() bool { return strings.Contains(co1.out.String(), "coordinator of run ralph_d") }, co1)
	w1 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	w2 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	waitFor(t, func() bool { return len(featCommitsQuiet(remote)) >= 1 }, co1, w1, w2)

	co2 := startBg(t, freshClone(t, remote), env, bin, natsCoordinatorArgs(remote, url)...)
	if code := co2.wait(t, time.Minute); code != 2 || !strings.Contains(co2.out.String(), "pid "+strconv.Itoa(co1.cmd.Process.Pid)+" on ") ||
		!strings.Contains(co2.out.String(), "--take-over") {
		t.Fatalf("a second coordinator of the run: exit %d\n%s", code, co2)
	}

	// Another run (its own branch) on the same server starts beside it.
	other, otherRemote, _, _ := clusterSetup(t, strings.Replace(diamond(2), "ralph/d", "ralph/e", 1))
	co3 := startBg(t, other, env, bin, natsCoordinatorArgs(otherRemote, url, "--queue-timeout", "2s")...)
	waitFor(t, func() bool { return strings.Contains(co3.out.String(), "coordinator of run ralph_e") }, co3)
	co3.wait(t, time.Minute) // no worker serves it: it stops after --queue-timeout

	co4 := startBg(t, freshClone(t, remote), env, bin, natsCoordinatorArgs(remote, url, "--take-over")...)
	co1.wait(t, time.Minute)
	if !strings.Contains(co1.out.String(), "took run ralph_d over: this one stops") {
		t.Fatalf("the first coordinator did not stop:\n%s\n%s", co1, co4)
	}
	os.WriteFile(filepath.Join(mark, "go"), nil, 0o644)
	if code := co4.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the coordinator that took over: exit %d\n%s\n%s\n%s\n%s", code, co1, co4, w1, w2)
	}
	if !strings.Contains(co4.out.String(), "took run ralph_d over from the coordinator pid "+strconv.Itoa(co1.cmd.Process.Pid)) {
		t.Fatalf("the take-over was not shown:\n%s", co4)
	}
	requireOneEach(t, remote, 5, co1, co4, w1, w2)
	requireWork(t, remote, 5, co1, co4, w1, w2)
}

// The coordinator killed with -9 while a story waits in the merge queue
// (its worker's commit fetched and verified in the dead coordinator's
// tree), and resumed on "another machine": a fresh clone, the same NATS.
// That story's work is not in the clone: it runs again, and every story
// ends on the remote with its work, merged once.
func TestClusterCoordinatorKilledInMergeQueue(t *testing.T) {
	bin := buildRalph(t)
	// The coordinator's gates hold once a first merge is on the remote:
	// those of a story judged on the stories ahead of it in the merge
	// queue (in a checkout of the judge, which the sandbox shows at the
	// repository's path).
	const checkSh = `case "$PWD" in "$COORD" | "$COORD"/.ralph/judge/trees/*) here=1 ;; esac
if [ -n "$here" ] && [ -f "$MARK/hold" ] && git ls-remote --exit-code "$REMOTE" refs/heads/ralph/d >/dev/null; then
	touch "$MARK/in-merge"; sleep 60
fi
test -f agent.sh
`
	repo, remote, mark, _ := clusterRepo(t, map[string]string{"prd.json": strings.Replace(diamond(4), `"test -f agent.sh"`, `"sh check.sh"`, 1),
		"agent.sh": clusterAgent, "check.sh": checkSh})
	url := natsServerProcess(t)
	os.WriteFile(filepath.Join(mark, "hold"), nil, 0o644)
	env := []string{natsTokenEnv, "MARK=" + mark, sandboxWritable(t, mark, remote), "COORD=" + repo, "REMOTE=" + remote}
	co := startBg(t, repo, env, bin, natsCoordinatorArgs(remote, url)...)
	w1 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--dir", "w", "--parallel", "2")
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(mark, "in-merge")); return err == nil }, co, w1)
	// The run's state on NATS has the story in the merge queue.
	nc, err := cluster.Connect(url, cluster.ConnOptions{Name: "test", Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
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
			Current []struct{ Phase string } `json:"current"`
		}
		return json.Unmarshal(e.Value(), &st) == nil && len(st.Current) > 0 && st.Current[0].Phase != "agent"
	}, co, w1)
	_ = syscall.Kill(-co.cmd.Process.Pid, syscall.SIGKILL)
	co.wait(t, 30*time.Second)
	os.Remove(filepath.Join(mark, "hold"))
	elsewhere := freshClone(t, remote)
	co2 := startBg(t, elsewhere, env, bin, natsCoordinatorArgs(remote, url)...)
	if code := co2.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the resumed coordinator: exit %d\n%s\n%s\n%s", code, co, co2, w1)
	}
	if !strings.Contains(co2.out.String(), "its work is not in this clone: it runs again") {
		t.Fatalf("the story in the merge queue was not run again:\n%s", co2)
	}
	requireOneEach(t, remote, 4, co, co2, w1)
	requireWork(t, remote, 4, co, co2, w1)
}

// needEmbeddedServer skips a test of the coordinator's embedded NATS
// server in a build without it (go test without -tags natsserver; make
// check sets the tag).
func needEmbeddedServer(t *testing.T) {
	t.Helper()
	if !cluster.EmbeddedServer {
		t.Skip("needs the embedded NATS server: go test -tags natsserver (make check sets it)")
	}
}
