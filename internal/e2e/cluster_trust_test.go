package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/testenv"
)

// The workers' trust model with real processes: a coordinator, workers
// with keys of their own (`ralph cluster key add`), and a forging worker
// — the real worker code with its own key whose gates "pass" without
// running (a gate runner that lies) and whose agent does something other
// than the story — against stories whose checks the forger's work does
// not meet.

// trustAgent does the story (its check wants S-N.out) once the file
// $MARK/go-<item> exists, if the test asks it to wait ($MARK/wait-<item>).
// The workers that run it are started with --no-sandbox: the sandbox
// keeps $MARK from a worker's agent, and what is tested here is trust,
// not confinement.
const trustAgent = `cat > /dev/null
echo "start $RALPH_ITEM_ID $(date +%s%N) $PPID" >> "$MARK/starts.log"
if [ -f "$MARK/wait-$RALPH_ITEM_ID" ]; then
	while [ ! -f "$MARK/go-$RALPH_ITEM_ID" ]; do sleep 0.1; done
fi
echo "$RALPH_ITEM_ID" > "$RALPH_ITEM_ID.out"
echo '<promise>COMPLETE</promise>'
`

// forgeAgent is the forger's agent: it changes something (the claim needs
// real work), never the story's file, and claims; with $MARK/wait-forger
// its Nth run waits for $MARK/go-forger-N.
const forgeAgent = `cat > /dev/null
echo "forge $RALPH_ITEM_ID" >> "$MARK/starts.log"
n=$(grep -c "^forge " "$MARK/starts.log")
if [ -f "$MARK/wait-forger" ]; then
	while [ ! -f "$MARK/go-forger-$n" ]; do sleep 0.1; done
fi
echo "not the work" > "notes-$RALPH_ITEM_ID.txt"
echo '<promise>COMPLETE</promise>'
`

// storiesPRD has stories S-1…S-n, independent, each with the check its
// agent's file meets.
func storiesPRD(n int) string {
	var s []string
	for i := 1; i <= n; i++ {
		s = append(s, fmt.Sprintf(`{"id":"S-%d","title":"story %d","priority":1,"checks":["test -f S-%d.out"]}`, i, i, i))
	}
	return `{"project":"d","branch_name":"ralph/d","user_stories":[` + strings.Join(s, ",") + `],"quality_checks":{"test":"test -f agent.sh"}}` + "\n"
}

// trustRepo is the repository with n stories, its remote and mark folder,
// a NATS URL, and the worker keys named (their files by name, in a
// folder outside the repository).
func trustRepo(t *testing.T, bin string, n int, keys ...string) (repo, remote, mark, url string, keyFiles map[string]string) {
	repo, remote, mark, url = clusterRepo(t, map[string]string{"prd.json": storiesPRD(n), "agent.sh": trustAgent, "forge.sh": forgeAgent})
	dir := t.TempDir()
	keyFiles = map[string]string{}
	for _, k := range keys {
		keyFiles[k] = filepath.Join(dir, k+".key")
		if r := runBin(t, repo, "", nil, bin, "cluster", "key", "add", k, "--out", keyFiles[k]); r.code != 0 {
			t.Fatalf("ralph cluster key add %s: %s", k, r)
		}
	}
	return repo, remote, mark, url, keyFiles
}

// lyingGates "runs" every gate and reports it passed.
type lyingGates struct{}

func (lyingGates) Run(context.Context, proc.Cmd) (proc.Result, error) {
	return proc.Result{ExitCode: 0}, nil
}

// forger runs the forging worker with the key in keyFile until stop (or
// the test's end); its log comes back as a Stringer.
func forger(t *testing.T, url, keyFile, mark string) (log fmt.Stringer, stop func()) {
	t.Helper()
	key, err := cluster.ReadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := cluster.Connect(url, cluster.ConnOptions{Own: key, Name: "forger"})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New("cmd", agent.Options{Command: []string{"sh", "forge.sh"}})
	if err != nil {
		t.Fatal(err)
	}
	buf := &forgerLog{}
	w := &cluster.Worker{NC: nc, Dir: t.TempDir(), Slots: 1, ID: key.Name, Host: "forger-host", Key: key, Log: buf,
		Override: ag, OverrideName: "cmd", Runner: proc.Exec{},
		ConfineAgent: func(a agent.Agent, _ string) agent.Agent { return envAgent{a, "MARK=" + mark} },
		ConfineGates: func(proc.Runner) proc.Runner { return lyingGates{} }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done; nc.Close() }) }
	t.Cleanup(stop)
	return buf, stop
}

// envAgent runs its agent with more of the environment.
type envAgent struct {
	agent.Agent
	env string
}

func (a envAgent) Run(ctx context.Context, req agent.Request) (agent.Result, error) {
	req.Env = append(req.Env, a.env)
	return a.Agent.Run(ctx, req)
}

// forgerLog is the forger's log, named so in a failure.
type forgerLog struct{ testenv.LockedBuffer }

func (l *forgerLog) String() string { return "forger:\n" + l.LockedBuffer.String() }

// landed is the message of the commit on the remote's feature branch
// that landed story id ("" when none did), and whether the story's file
// is in the branch.
func landed(t *testing.T, remote, id string) (msg string, file bool) {
	t.Helper()
	if git(t, remote, "for-each-ref", "refs/heads/ralph/d") == "" {
		return "", false // nothing landed yet
	}
	out := git(t, remote, "log", "--format=%H %s", "ralph/d")
	for _, l := range strings.Split(out, "\n") {
		sha, subject, _ := strings.Cut(l, " ")
		if strings.HasPrefix(subject, "feat("+id+")") {
			msg = git(t, remote, "log", "-1", "--format=%B", sha)
		}
	}
	files := git(t, remote, "ls-tree", "-r", "--name-only", "ralph/d")
	return msg, strings.Contains("\n"+files+"\n", "\n"+id+".out\n")
}

// A forging worker — its key, its gates reporting every check passed
// without running it, its agent doing other work — against one story
// whose check its work does not meet.
//
// Control: without --judge-on-coordinator the tree the coordinator judges
// is exactly the forger's commit, and its results stand: the story lands
// without its file — the trust a worker is given, as a CI runner is —
// and the landed commit, the judgement log and the agent_finished event
// name the forger, whose key one revokes. With --judge-on-coordinator the
// coordinator runs every gate itself: the forged pass is caught, the
// story never lands, and the coordinator is named as its judge.
func TestClusterForgingWorkerJudgeOnCoordinator(t *testing.T) {
	bin := buildRalph(t)
	for _, judgeHere := range []bool{false, true} {
		t.Run(fmt.Sprintf("judge-on-coordinator=%v", judgeHere), func(t *testing.T) {
			repo, remote, mark, url, keys := trustRepo(t, bin, 1, "forger")
			env := []string{"MARK=" + mark, sandboxWritable(t, mark)}
			args := coordinatorArgs(remote, url, "--max-attempts", "2", "--parallel", "1")
			if judgeHere {
				args = append(args, "--judge-on-coordinator")
			}
			co := startBg(t, repo, env, bin, args...)
			waitFor(t, func() bool { return strings.Contains(co.out.String(), "start workers with") }, co)
			f, _ := forger(t, url, keys["forger"], mark)
			code := co.wait(t, 2*time.Minute)
			msg, file := landed(t, remote, "S-1")
			last := judge.Last(filepath.Join(repo, ".ralph"), "S-1")
			if !judgeHere {
				if code != 0 || msg == "" || file {
					t.Fatalf("control: the forger's attested tree did not land as it judged it (exit %d, file %v):\n%s\n%s\n%s", code, file, msg, co, f)
				}
				if !strings.Contains(msg+"\n", "\nRalph-Judged-By: worker forger on forger-host\n") {
					t.Fatalf("the landed commit does not name the forger:\n%s", msg)
				}
				var judged *judge.Judgement
				js, _ := judge.Read(filepath.Join(repo, ".ralph"), "S-1")
				for i := range js {
					if js[i].Passed && js[i].Landed == "" {
						judged = &js[i]
					}
				}
				if judged == nil || judged.Worker != "worker forger on forger-host" {
					t.Fatalf("the judgement log does not name the forger: %+v", js)
				}
				if !strings.Contains(co.out.String(), "workers run each story's gates; their results stand only for exactly the tree judged here") {
					t.Fatalf("the coordinator does not say what it trusts:\n%s", co)
				}
				found := false
				for _, ev := range eventsOf(loadEvents(t, repo), "agent_finished") {
					found = found || ev.Data["worker"] == "forger" && ev.Data["worker_host"] == "forger-host"
				}
				if !found {
					t.Fatalf("no agent_finished event names the forger: %+v", eventsOf(loadEvents(t, repo), "agent_finished"))
				}
				return
			}
			if code == 0 || msg != "" {
				t.Fatalf("--judge-on-coordinator: the forged pass landed (exit %d):\n%s\n%s\n%s", code, msg, co, f)
			}
			if last == nil || last.Passed || !strings.Contains(last.Summary, "S-1 check 1 FAILED") || last.Worker != cluster.JudgedHere() {
				t.Fatalf("the last judgement of S-1: %+v\n%s", last, co)
			}
			if !strings.Contains(co.out.String(), "--judge-on-coordinator: every story's gates run here") {
				t.Fatalf("the coordinator does not say it judges every story:\n%s", co)
			}
			if starts, _ := os.ReadFile(filepath.Join(mark, "starts.log")); strings.Count(string(starts), "forge S-1") != 2 {
				t.Fatalf("the forger ran S-1 %d times (want 2 attempts):\n%s", strings.Count(string(starts), "forge S-1"), starts)
			}
		})
	}
}

// A forging worker's results count only for the exact tree it judged:
// when another story landed while it worked, the coordinator judges the
// forger's work merged onto the branch — a tree the forger never ran
// gates on — runs the gates itself and catches the forged pass. An honest
// worker then does the story, and the landed commits name their workers.
func TestClusterForgingWorkerCaughtOffItsTree(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, url, keys := trustRepo(t, bin, 2, "honest", "forger")
	env := []string{"MARK=" + mark, sandboxWritable(t, mark)}
	// The honest worker's story (X) waits until the forger holds the
	// other (Y); the forger's first run waits until X landed, its second
	// never ends.
	for _, f := range []string{"wait-S-1", "wait-S-2", "wait-forger"} {
		os.WriteFile(filepath.Join(mark, f), nil, 0o644)
	}
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url, "--parallel", "2")...)
	honest := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--key", keys["honest"], "--dir", "w", "--no-sandbox")
	started := func(prefix string) string {
		b, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == prefix {
				return f[1]
			}
		}
		return ""
	}
	waitFor(t, func() bool { return started("start") != "" }, co, honest)
	x := started("start")
	f, stopForger := forger(t, url, keys["forger"], mark)
	waitFor(t, func() bool { return started("forge") != "" }, co, honest, f)
	y := started("forge")
	if x == y {
		t.Fatalf("both workers ran %s", x)
	}
	os.WriteFile(filepath.Join(mark, "go-"+x), nil, 0o644)
	waitFor(t, func() bool { msg, _ := landed(t, remote, x); return msg != "" }, co, honest, f)
	os.WriteFile(filepath.Join(mark, "go-forger-1"), nil, 0o644)
	// The forger's Y is judged merged onto the branch, its gates run here.
	caught := func() *judge.Judgement {
		for _, jd := range judgements(t, repo, y) {
			if jd.Claimed && !jd.Passed && jd.Summary != "" {
				return &jd
			}
		}
		return nil
	}
	waitFor(t, func() bool { return caught() != nil }, co, honest, f)
	stopForger()
	os.WriteFile(filepath.Join(mark, "go-"+y), nil, 0o644)
	if code := co.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s\n%s", code, co, honest, f)
	}
	if jd := caught(); !strings.Contains(jd.Summary, "integrated gates failed") || jd.Worker != cluster.JudgedHere() {
		t.Fatalf("the forged %s was not caught on the merged tree: %+v\n%s", y, jd, co)
	}
	tr, _ := filepath.Glob(filepath.Join(repo, ".ralph", "transcripts", "*"+y+".log"))
	all := ""
	for _, p := range tr {
		b, _ := os.ReadFile(p)
		all += string(b)
	}
	if !strings.Contains(all, "worker forger on forger-host's gates ran on tree") || !strings.Contains(all, "the gates run here") {
		t.Fatalf("%s's transcripts do not say why the forger's results did not stand:\n%s", y, all)
	}
	for _, id := range []string{x, y} {
		msg, file := landed(t, remote, id)
		if msg == "" || !file {
			t.Fatalf("%s did not land with its file:\n%s\n%s\n%s", id, co, honest, f)
		}
		if !strings.Contains(msg, "Ralph-Judged-By: ") || strings.Contains(msg, "forger") {
			t.Fatalf("%s's commit does not name its judge, or names the forger:\n%s", id, msg)
		}
	}
	if msg, _ := landed(t, remote, x); !strings.Contains(msg, "Ralph-Judged-By: worker honest on ") {
		t.Fatalf("%s's commit does not name the honest worker:\n%s", x, msg)
	}
}

func judgements(t *testing.T, repo, id string) []judge.Judgement {
	js, err := judge.Read(filepath.Join(repo, ".ralph"), id)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// Worker keys: once the repository has them, the coordinator's NATS
// server admits workers by their keys only — a worker with the token, or
// none, is refused. A key revoked while its worker holds a job shuts the
// worker out at once: it stops, saying its key was refused, its job goes
// to another worker, and started again with that key it is refused. The
// landed commit names the worker whose gates judged it.
func TestClusterRevokedWorkerKey(t *testing.T) {
	bin := buildRalph(t)
	repo, remote, mark, url, keys := trustRepo(t, bin, 1, "w1", "w2")
	env := []string{"MARK=" + mark, sandboxWritable(t, mark)}
	os.WriteFile(filepath.Join(mark, "wait-S-1"), nil, 0o644) // w1 never finishes
	co := startBg(t, repo, env, bin, coordinatorArgs(remote, url)...)
	waitFor(t, func() bool { return strings.Contains(co.out.String(), "start workers with") }, co)
	if !strings.Contains(co.out.String(), "--key FILE") {
		t.Fatalf("the coordinator does not tell workers to bring their keys:\n%s", co)
	}
	if _, err := os.Stat(filepath.Join(repo, ".ralph", "nats-token")); err == nil {
		t.Fatal("a coordinator with worker keys made a shared token")
	}
	// A token is no credential here.
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("e2e-guess-0123456789\n"), 0o600)
	if r := runBin(t, t.TempDir(), "", env, bin, "worker", "--nats", url, "--token-file", tokenFile, "--dir", "w"); r.code != 2 || !strings.Contains(r.stderr, "refused this worker's credentials") {
		t.Fatalf("a worker with a token: %s", r)
	}
	w1 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--key", keys["w1"], "--dir", "w", "--no-sandbox")
	waitFor(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(mark, "starts.log"))
		return strings.Contains(string(b), "start S-1 ")
	}, co, w1)
	if r := runBin(t, repo, "", nil, bin, "cluster", "key", "revoke", "w1"); r.code != 0 || !strings.Contains(r.stderr, "worker key w1 revoked") {
		t.Fatalf("revoke: %s", r)
	}
	if code := w1.wait(t, 30*time.Second); code != 2 || !strings.Contains(w1.out.String(), "refused this worker's credentials") || !strings.Contains(w1.out.String(), "its key w1") {
		t.Fatalf("the revoked worker: exit %d\n%s", code, w1)
	}
	waitFor(t, func() bool {
		return strings.Contains(co.out.String(), "worker key w1 revoked") && strings.Contains(co.out.String(), "worker w1's key was revoked: the job is queued again")
	}, co)
	if r := runBin(t, t.TempDir(), "", env, bin, "worker", "--nats", url, "--key", keys["w1"], "--dir", "w"); r.code != 2 || !strings.Contains(r.stderr, "refused this worker's credentials") {
		t.Fatalf("the revoked key, started again: %s", r)
	}
	os.WriteFile(filepath.Join(mark, "go-S-1"), nil, 0o644)
	w2 := startBg(t, t.TempDir(), env, bin, "worker", "--nats", url, "--key", keys["w2"], "--dir", "w", "--no-sandbox")
	if code := co.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("coordinator exit %d\n%s\n%s\n%s", code, co, w1, w2)
	}
	msg, file := landed(t, remote, "S-1")
	if !file || !strings.Contains(msg, "\nRalph-Judged-By: worker w2 on ") {
		t.Fatalf("S-1's commit does not name w2:\n%s\n%s", msg, co)
	}
	if r := runBin(t, repo, "", nil, bin, "cluster", "key", "list"); r.code != 0 || !strings.Contains(r.stdout, "w1") || !strings.Contains(r.stdout, "revoked") || !strings.Contains(r.stdout, "w2") {
		t.Fatalf("key list: %s", r)
	}
}
