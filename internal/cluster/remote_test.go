package cluster

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/testenv"
)

// remoteRig is a coordinator's RemoteAgent on an embedded NATS with a real
// git remote, and the means to play its workers by hand.
type remoteRig struct {
	t      *testing.T
	js     jetstream.JetStream
	names  Names
	repo   *git.Repo
	remote string
	ra     *RemoteAgent
	log    *testenv.LockedBuffer
}

func newRemoteRig(t *testing.T, lease time.Duration) *remoteRig {
	t.Helper()
	ctx := t.Context()
	js := testJS(t)
	names := NamesFor("ralph/t")
	if err := Setup(ctx, js, names, RunConfig{Lease: lease}); err != nil {
		t.Fatal(err)
	}
	dir, remote := t.TempDir(), filepath.Join(t.TempDir(), "remote.git")
	repo := &git.Repo{Dir: dir, Runner: proc.Exec{}}
	mustGit(t, repo, "init", "-q", "-b", "work")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, repo, "add", "a.txt")
	mustGit(t, repo, "commit", "-q", "-m", "base")
	mustGit(t, repo, "init", "-q", "--bare", remote)
	log := &testenv.LockedBuffer{}
	ra := &RemoteAgent{JS: js, Names: names, Repo: repo, Remote: remote, Spec: AgentSpec{Name: "cmd"}, Epoch: 1, Lease: lease, Log: log}
	return &remoteRig{t: t, js: js, names: names, repo: repo, remote: remote, ra: ra, log: log}
}

func mustGit(t *testing.T, r *git.Repo, args ...string) string {
	t.Helper()
	out, err := r.Run(t.Context(), args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(out)
}

// run starts the agent's Run on the rig's tree; the result comes on the
// channel.
func (g *remoteRig) run() <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := g.ra.Run(g.t.Context(), agent.Request{Dir: g.repo.Dir, Iteration: 1, ItemID: "S-1", Timeout: time.Minute, Transcript: g.log})
		done <- err
	}()
	return done
}

// take plays a worker that takes the next job: it claims it and commits
// on the job's base; report stores the outcome and acknowledges the job.
func (g *remoteRig) take(worker string) (report func(), commit string) {
	return g.takeWith(worker, nil)
}

// takeWith is take with the outcome as edit makes it (signed, with gate
// results).
func (g *remoteRig) takeWith(worker string, edit func(*outcome)) (report func(), commit string) {
	put, commit := g.takeReporting(worker)
	return func() { put(edit, true) }, commit
}

// takeReporting is take whose report may be stored more than once, each
// as edit makes it, the job acknowledged by the last (ack).
func (g *remoteRig) takeReporting(worker string) (report func(edit func(*outcome), ack bool), commit string) {
	t, ctx := g.t, g.t.Context()
	cons, err := g.js.Consumer(ctx, g.names.Stream, g.names.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
	if err != nil {
		t.Fatalf("%s: no job: %v", worker, err)
	}
	var j job
	if err := json.Unmarshal(msg.Data(), &j); err != nil {
		t.Fatal(err)
	}
	secret, _ := randomHex()
	proof := proofOf(secret)
	claims, _ := g.js.KeyValue(ctx, g.names.Claims)
	b, _ := json.Marshal(claim{Worker: worker, Host: "h", Proof: proof, At: time.Now().UTC()})
	if _, err := claims.Put(ctx, j.Key, b); err != nil {
		t.Fatal(err)
	}
	wt := &git.Repo{Dir: t.TempDir(), Runner: proc.Exec{}}
	mustGit(t, wt, "init", "-q")
	mustGit(t, wt, "fetch", "-q", g.remote, "refs/ralph/bases/"+j.Key)
	mustGit(t, wt, "checkout", "-q", "--detach", "FETCH_HEAD")
	if err := os.WriteFile(filepath.Join(wt.Dir, worker+".txt"), []byte(worker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, wt, "add", "-A")
	mustGit(t, wt, "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-q", "-m", "work of "+worker)
	commit = mustGit(t, wt, "rev-parse", "HEAD")
	mustGit(t, wt, "push", "-q", g.remote, "HEAD:"+jobRef(j.Key, proof))
	return func(edit func(*outcome), ack bool) {
		results, _ := g.js.KeyValue(ctx, g.names.Results)
		o := outcome{Key: j.Key, Worker: worker, Host: "h", Secret: secret, Commit: commit}
		if edit != nil {
			edit(&o)
		}
		b, _ := json.Marshal(o)
		if _, err := results.Put(ctx, resultKey(j.Key, proof), b); err != nil {
			t.Fatal(err)
		}
		if !ack {
			return
		}
		if err := msg.Ack(); err != nil {
			t.Fatal(err)
		}
	}, commit
}

// beat puts a worker's heartbeat.
func (g *remoteRig) beat(worker string) {
	workers, _ := g.js.KeyValue(g.t.Context(), g.names.Workers)
	b, _ := json.Marshal(WorkerInfo{ID: worker, Host: "h", Seen: time.Now().UTC()})
	if _, err := workers.Put(g.t.Context(), worker, b); err != nil {
		g.t.Fatal(err)
	}
}

func (g *remoteRig) waitLog(text string) {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(g.log.String(), text) {
		if time.Now().After(deadline) {
			g.t.Fatalf("the transcript never said %q:\n%s", text, g.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *remoteRig) finished(done <-chan error, want string) {
	g.t.Helper()
	select {
	case err := <-done:
		if err != nil {
			g.t.Fatalf("Run: %v\n%s", err, g.log)
		}
	case <-time.After(30 * time.Second):
		g.t.Fatalf("Run never returned:\n%s", g.log)
	}
	if head := mustGit(g.t, g.repo, "rev-parse", "HEAD"); head != want {
		g.t.Fatalf("the tree is at %s, not the worker's commit %s:\n%s", head, want, g.log)
	}
}

// A worker's outcome that arrives while its heartbeat has lapsed (a beat
// held up by a reconnect) is not lost: it counts once the heartbeat is
// back, and the job is not run again.
func TestRemoteOutcomeWaitsForLapsedHeartbeat(t *testing.T) {
	g := newRemoteRig(t, 2*time.Second)
	done := g.run()
	report, commit := g.take("w1") // no heartbeat yet
	report()
	g.waitLog("it counts if the worker's heartbeat comes back")
	time.Sleep(1500 * time.Millisecond) // a tick or two with no heartbeat
	g.beat("w1")
	g.finished(done, commit)
	if strings.Contains(g.log.String(), "queued again") {
		t.Fatalf("the job was queued again while its outcome waited:\n%s", g.log)
	}
}

// A worker that takes a job off the queue, stores an outcome that does not
// count (its heartbeat gone) and never comes back does not stall the run
// until --queue-timeout: once a heartbeat would have lived, the job is
// queued again and another worker's outcome counts.
func TestRemoteJobLeftQueueWithoutOutcome(t *testing.T) {
	g := newRemoteRig(t, time.Second)
	done := g.run()
	report, _ := g.take("w1")
	report()
	g.waitLog("it counts if the worker's heartbeat comes back")
	g.waitLog("left the queue without an outcome that counts: queued again")
	g.beat("w2")
	report, commit := g.take("w2")
	report()
	g.finished(done, commit)
}

// keyedRig is a rig whose run has worker keys w1 and w2; sign signs an
// outcome with one of them.
func keyedRig(t *testing.T) (g *remoteRig, path string, sign map[string]func(*outcome)) {
	g = newRemoteRig(t, 2*time.Second)
	path, ring, keys := workerKeys(t, "w1", "w2")
	sign = map[string]func(*outcome){}
	for name, k := range keys {
		sign[name] = func(o *outcome) {
			if err := k.signOutcome(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	g.ra.Keys = ring
	return g, path, sign
}

// With worker keys, a report counts only signed by its worker's key: an
// unsigned one, or one w2 signed in w1's name, is ignored and shown, and
// the signed one that follows counts. Its result names the worker, and
// the gates it ran stand for exactly its commit's tree.
func TestRemoteCountsOnlySignedReports(t *testing.T) {
	g, _, sign := keyedRig(t)
	g.ra.Attest = &Attestations{}
	gates := []gate.Gate{{Name: "test", Command: "make test"}}
	g.ra.GatesFor = func(string) []gate.Gate { return gates }
	g.beat("w1")
	done := make(chan agent.Result, 1)
	go func() {
		res, err := g.ra.Run(g.t.Context(), agent.Request{Dir: g.repo.Dir, Iteration: 1, ItemID: "S-1", Timeout: time.Minute, Transcript: g.log})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	passed := []gate.Result{{Name: "test", Command: "make test", Passed: true}}
	report, commit := g.takeReporting("w1")
	report(func(o *outcome) { o.Gates = passed }, false)
	g.waitLog(`from "w1": the report is not signed`)
	report(func(o *outcome) { o.Gates = passed; sign["w2"](o) }, false)
	g.waitLog(`from "w1": its signature does not hold for worker w1's key`)
	report(func(o *outcome) { o.Gates = passed; sign["w1"](o) }, true)
	var res agent.Result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Run never returned:\n%s", g.log)
	}
	if head := mustGit(t, g.repo, "rev-parse", "HEAD"); head != commit {
		t.Fatalf("the tree is at %s, not the signed report's commit %s:\n%s", head, commit, g.log)
	}
	if res.Worker != "w1" || res.WorkerHost != "h" {
		t.Fatalf("the result names worker %q on %q", res.Worker, res.WorkerHost)
	}
	at, ok := g.ra.Attest.Attested("S-1")
	tree := mustGit(t, g.repo, "rev-parse", commit+"^{tree}")
	if !ok || at.Tree != tree || at.By != "worker w1 on h" || len(at.Results) != 1 || !at.Results[0].Passed || len(at.Gates) != 1 {
		t.Fatalf("attestation %+v (want tree %s)", at, tree)
	}
}

// A worker whose key is revoked while it holds a job loses it at once:
// the job is queued again (not after the lease), and what the revoked
// worker reports then is refused; another worker's report counts.
func TestRemoteRevokedWorkerLosesItsJob(t *testing.T) {
	g, path, sign := keyedRig(t)
	g.beat("w1")
	g.beat("w2")
	done := g.run()
	late, _ := g.takeWith("w1", sign["w1"])
	g.waitLog("taken by worker w1")
	if _, _, err := RevokeKey(path, "w1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ra.Keys.Refresh(); err != nil {
		t.Fatal(err)
	}
	g.waitLog("worker w1's key was revoked: the job is queued again for another worker")
	late() // the revoked worker's report, once it lost the job
	g.waitLog(`from "w1": worker w1's key was revoked on`)
	report, commit := g.takeWith("w2", sign["w2"])
	report()
	g.finished(done, commit)
}

// Run's phases on their own: publish pushes the start and queues the job
// (with the item's gates when the coordinator takes attestations), close
// takes it all back; await gives up on a job nobody takes; collect
// refuses a commit that does not continue the iteration's branch.
func TestRemotePhases(t *testing.T) {
	g := newRemoteRig(t, 2*time.Second)
	ctx := t.Context()
	g.ra.Attest = &Attestations{}
	g.ra.Attest.Put("S-1", judge.Attestation{Tree: "stale"})
	gates := []gate.Gate{{Name: "test", Command: "make test"}}
	g.ra.GatesFor = func(string) []gate.Gate { return gates }
	g.ra.QueueTimeout = time.Second
	req := agent.Request{Dir: g.repo.Dir, Iteration: 7, ItemID: "S-1", Timeout: time.Minute, Transcript: g.log, Env: []string{"RALPH_ITEM_ID=S-1", "MY_API_KEY=x"}}
	j, err := g.ra.publish(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	base := mustGit(t, g.repo, "rev-parse", "HEAD")
	if got := mustGit(t, g.repo, "ls-remote", g.remote, "refs/ralph/bases/"+j.key); !strings.HasPrefix(got, base) {
		t.Fatalf("the job's base on the remote: %q (want %s)", got, base)
	}
	if _, ok := g.ra.Attest.Attested("S-1"); ok {
		t.Fatal("an earlier iteration's attestation outlived the new job")
	}
	st, _ := g.js.Stream(ctx, g.names.Stream)
	m, err := st.GetMsg(ctx, j.seq)
	if err != nil {
		t.Fatal(err)
	}
	var queued job
	if err := json.Unmarshal(m.Data, &queued); err != nil {
		t.Fatal(err)
	}
	if queued.Base != base || queued.Branch != "work" || queued.Iteration != 7 || len(queued.Gates) != 1 || strings.Join(queued.Env, " ") != "RALPH_ITEM_ID=S-1" {
		t.Fatalf("queued %+v", queued)
	}
	if jobs := g.ra.Jobs(); len(jobs) != 1 || jobs[0].State != JobQueued {
		t.Fatalf("jobs %+v", jobs)
	}
	// Nobody takes it: await stops within the queue timeout.
	if _, accepted, err := g.ra.await(ctx, j); accepted || !errors.Is(err, ErrNoWorker) {
		t.Fatalf("await: %v %v", accepted, err)
	}
	// collect: a commit off the branch is refused.
	wt := &git.Repo{Dir: t.TempDir(), Runner: proc.Exec{}}
	mustGit(t, wt, "init", "-q")
	mustGit(t, wt, "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-q", "--allow-empty", "-m", "elsewhere")
	mustGit(t, g.repo, "fetch", "-q", wt.Dir, "HEAD")
	j.out = outcome{Worker: "w1", Host: "h", Commit: mustGit(t, wt, "rev-parse", "HEAD")}
	if _, err := g.ra.collect(ctx, j); err == nil || !strings.Contains(err.Error(), "does not continue work") {
		t.Fatalf("collect: %v", err)
	}
	g.ra.close(ctx, j)
	if got := mustGit(t, g.repo, "ls-remote", g.remote, "refs/ralph/*"); got != "" {
		t.Fatalf("refs left on the remote: %s", got)
	}
	if _, err := st.GetMsg(ctx, j.seq); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the job is still queued: %v", err)
	}
	if len(g.ra.Jobs()) != 0 {
		t.Fatalf("jobs %+v", g.ra.Jobs())
	}
}
