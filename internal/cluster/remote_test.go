package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/git"
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
	return func() {
		results, _ := g.js.KeyValue(ctx, g.names.Results)
		b, _ := json.Marshal(outcome{Key: j.Key, Worker: worker, Host: "h", Secret: secret, Commit: commit})
		if _, err := results.Put(ctx, resultKey(j.Key, proof), b); err != nil {
			t.Fatal(err)
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
