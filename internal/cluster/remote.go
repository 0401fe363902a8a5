package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
)

// RemoteAgent is the coordinator's agent: it hands each iteration to a
// worker and brings the worker's commit back into the iteration's tree.
type RemoteAgent struct {
	JS     jetstream.JetStream
	Names  Names
	Repo   *git.Repo // the coordinator's repository (At the worktree)
	Remote string    // the git remote's URL
	Spec   AgentSpec
	Epoch  int64 // this coordinator's start: job keys never repeat
	// Listing runs a git command that reads every worktree's HEAD (a
	// fetch does) while no worktree is being added (nil: runs it).
	Listing func(func() error) error
	// Shared, when the source has files the agent edits besides its
	// commits (the task loop), ships them with each job and merges the
	// worker's edits back.
	Shared Shared
	// GatesFor, when set with Attest, names an item's gates: the worker
	// runs them on its commit, and their results go to Attest for the
	// coordinator's judge (judge.Attester).
	GatesFor    func(item string) []gate.Gate
	GateTimeout time.Duration
	Attest      *Attestations
	// Keys, when the run has worker keys, are the keys workers sign their
	// reports with: a report counts only with a signature of a key not
	// revoked, and a worker whose key is revoked loses its job at once.
	Keys *Keyring
	// QueueTimeout is how long a job may wait for a worker to take it
	// (default DefaultQueueTimeout); past it the run stops, saying so.
	QueueTimeout time.Duration
	// Lease is the run's lease (default DefaultLease): a worker's
	// heartbeat lives three.
	Lease time.Duration
	// Log gets what the coordinator's person should see: outcomes that
	// were ignored and why.
	Log     io.Writer
	results jetstream.KeyValue
	claims  jetstream.KeyValue
	workers jetstream.KeyValue
	files   jetstream.ObjectStore
	jobsMu  sync.Mutex
	jobs    map[string]*JobInfo // by key, while Run waits for them
	// fetching: one fetch at a time into the repository's one object
	// store (two at once can each take the other's half-written objects
	// for present and fail "did not send all necessary objects").
	fetching sync.Mutex
}

// Shared is what a source lets the agent edit besides the tree's commits.
type Shared interface {
	// SharedFiles are the files with what they hold now (nil: absent),
	// by path in the tree; restore are the paths a worker puts back as
	// the base had them before committing; keepOut the paths a commit of
	// this tree leaves out.
	SharedFiles(ctx context.Context) (files map[string][]byte, restore, keepOut []string, err error)
	// MergeShared brings the worker's edits (sent → got) into the files;
	// notes are for the iteration's transcript.
	MergeShared(sent, got map[string][]byte) (notes []string, err error)
}

func (r *RemoteAgent) Name() string { return r.Spec.Name }

func (r *RemoteAgent) Plan(req agent.Request) (agent.Invocation, error) {
	return agent.Invocation{Note: fmt.Sprintf("a worker runs %s on the job from the NATS queue %s", r.Spec.Name, r.Names.Subject)}, nil
}

// DefaultQueueTimeout is how long a job waits for a worker by default.
const DefaultQueueTimeout = 10 * time.Minute

// Jobs are the jobs Run waits for now, by item.
func (r *RemoteAgent) Jobs() []JobInfo {
	r.jobsMu.Lock()
	defer r.jobsMu.Unlock()
	out := make([]JobInfo, 0, len(r.jobs))
	for _, j := range r.jobs {
		out = append(out, *j)
	}
	slices.SortFunc(out, func(a, b JobInfo) int { return strings.Compare(a.Item, b.Item) })
	return out
}

// setJob records a job's state (nil c: queued); gone drops it.
func (r *RemoteAgent) setJob(key, item string, c *claim, gone bool) {
	r.jobsMu.Lock()
	defer r.jobsMu.Unlock()
	if gone {
		delete(r.jobs, key)
		return
	}
	if r.jobs == nil {
		r.jobs = map[string]*JobInfo{}
	}
	j := &JobInfo{Item: item, Key: key, State: JobQueued, Since: time.Now().UTC()}
	if c != nil {
		j.State, j.Worker, j.Host = JobRunning, c.Worker, c.Host
	}
	if old := r.jobs[key]; old != nil && old.State == j.State && old.Worker == j.Worker {
		return
	}
	r.jobs[key] = j
}

// dropRefs deletes the job's refs from the remote: its base, and the
// commit of every claim.
func (r *RemoteAgent) dropRefs(ctx context.Context, repo *git.Repo, key string) {
	pairs := []string{"", "refs/ralph/bases/" + key}
	if out, err := repo.Run(ctx, "ls-remote", "--", r.Remote, "refs/ralph/jobs/"+key+"/*"); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				pairs = append(pairs, "", f[1])
			}
		}
	}
	_ = repo.PushForce(ctx, r.Remote, pairs...)
}

// PruneRefs deletes the job refs an earlier coordinator of this run left
// on the remote: one killed while a job ran never deleted them (Run's
// own cleanup), and nobody else would — and a worker still running such a
// job pushes its commit after this coordinator started, so a stopping
// coordinator prunes again (all true: its own jobs' refs too, none of
// which is wanted any longer). Only the run's own refs go: the lease makes
// this coordinator the run's only one, and other runs' refs on a shared
// remote carry other names.
func (r *RemoteAgent) PruneRefs(ctx context.Context, repo *git.Repo, all bool) error {
	prefix := r.Names.Run + "="
	out, err := repo.Run(ctx, "ls-remote", "--", r.Remote, "refs/ralph/bases/"+prefix+"*", "refs/ralph/jobs/"+prefix+"*")
	if err != nil {
		return err
	}
	mine := fmt.Sprintf("%s%d-", prefix, r.Epoch)
	var pairs []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		key := strings.TrimPrefix(strings.TrimPrefix(f[1], "refs/ralph/bases/"), "refs/ralph/jobs/")
		if strings.HasPrefix(key, prefix) && (all || !strings.HasPrefix(key, mine)) {
			pairs = append(pairs, "", f[1])
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return repo.PushForce(ctx, r.Remote, pairs...)
}

// ErrNoWorker is the error of a job no worker took in time.
var ErrNoWorker = errors.New("no worker took the job")

// Run publishes the job, awaits its outcome and collects the worker's
// work into the iteration's tree. The tree at req.Dir is pushed first
// (its uncommitted changes as a commit of their own); after the worker's
// report its commit is fetched and the tree fast-forwarded to it, so that
// the engine judges the worker's work in place.
//
// Only the outcome of the worker that holds the job's claim, proved by
// the secret behind the claim, from a worker whose heartbeat is live (and,
// with worker keys, signed by that worker's key, not revoked), counts:
// anything else is ignored and reported. A worker that could not run the
// job (a failed fetch or push) puts it back in the queue: that is never
// the agent's failure. A job nobody takes within QueueTimeout stops the
// run; one a worker holds longer than the agent's timeout allows is the
// agent's timeout. Either way, and when the iteration stops, the job is
// taken off the queue and its worker's agent stopped.
func (r *RemoteAgent) Run(ctx context.Context, req agent.Request) (agent.Result, error) {
	j, err := r.publish(ctx, req)
	if j != nil {
		defer r.close(context.WithoutCancel(ctx), j)
	}
	if err != nil {
		return agent.Result{}, err
	}
	for {
		res, accepted, err := r.await(ctx, j)
		if !accepted {
			return res, err
		}
		if err := r.fetch(ctx, j); err != nil {
			if errors.Is(err, errNotTheWorkers) {
				continue // queued again
			}
			return agent.Result{}, err
		}
		return r.collect(ctx, j)
	}
}

// remoteJob is one iteration's job, from its publishing to its end.
type remoteJob struct {
	req      agent.Request
	w        io.Writer // the iteration's transcript
	repo     *git.Repo // the iteration's tree
	key      string
	branch   string
	job      job
	msg      []byte // the job as queued
	seq      uint64 // its message in the stream
	requeued int
	// The shared files sent (by path), which exist (as the job says), the
	// paths a commit of the tree leaves out.
	sent    map[string][]byte
	shared  map[string]bool
	keepOut []string
	pushed  bool // its base is on the remote
	results jetstream.KeyWatcher
	claims  jetstream.KeyWatcher
	// Waiting for a worker since queued (again); held since first taken.
	queued, taken time.Time
	current       claim
	// Outcomes already judged, by revision; one ignored only for its
	// worker's lapsed heartbeat is judged again while it waits, since
	// lapsed, for as long as a heartbeat lives.
	judged map[uint64]bool
	lapsed time.Time
	out    outcome // the outcome that counts, once accepted
	done   bool    // the outcome was taken: nothing to cancel
}

// publish pushes the iteration's start to the remote and queues its job.
// The job it returns (also on an error, once anything was made) is
// closed by close.
func (r *RemoteAgent) publish(ctx context.Context, req agent.Request) (*remoteJob, error) {
	if err := r.buckets(ctx); err != nil {
		return nil, err
	}
	repo := r.Repo.At(req.Dir)
	branch, base, err := repo.Where(ctx)
	if err != nil || branch == "" || branch == "HEAD" || base == "" {
		return nil, fmt.Errorf("remote agent: the tree %s is not on a branch with a commit (%v)", req.Dir, err)
	}
	j := &remoteJob{req: req, w: req.Transcript, repo: repo, branch: branch, key: jobKey(r.Names.Run, r.Epoch, req.Iteration, req.ItemID), judged: map[uint64]bool{}}
	if j.w == nil {
		j.w = io.Discard
	}
	var restore []string
	if r.Shared != nil {
		if j.sent, restore, j.keepOut, err = r.Shared.SharedFiles(ctx); err != nil {
			return nil, err
		}
	}
	if base, err = r.commitTree(ctx, repo, req, base, j.keepOut); err != nil {
		return nil, err
	}
	if j.shared, err = r.putShared(ctx, j.key, j.sent); err != nil {
		return j, err
	}
	if err := repo.PushForce(ctx, r.Remote, base, "refs/ralph/bases/"+j.key); err != nil {
		return j, fmt.Errorf("remote agent: pushing %s's start: %w", branch, err)
	}
	// The job's refs leave the remote with the job: its commit is here
	// once fetched, or no longer wanted.
	j.pushed = true
	if j.results, err = r.results.Watch(ctx, j.key+".*"); err != nil {
		return j, err
	}
	if j.claims, err = r.claims.Watch(ctx, j.key); err != nil {
		return j, err
	}
	j.job = job{Key: j.key, Item: req.ItemID, Role: req.Role, Iteration: req.Iteration, Attempt: req.Attempt, Branch: branch, Base: base,
		Prompt: req.Prompt, Env: jobEnvOf(req.Env), Model: req.Model, Timeout: req.Timeout, Agent: r.Spec,
		TreeEnv: treeEnv(req.Env, req.Dir), Shared: j.shared, Restore: restore, GateTimeout: r.GateTimeout}
	if r.GatesFor != nil && r.Attest != nil {
		j.job.Gates = r.GatesFor(req.ItemID)
		r.Attest.Drop(req.ItemID)
	}
	j.msg, _ = json.Marshal(j.job)
	if err := r.queue(ctx, j); err != nil {
		return j, err
	}
	fmt.Fprintf(j.w, "[ralph] job %s queued for a worker (%s at %s)\n", j.key, branch, short(base))
	return j, nil
}

// queue puts the job on the queue (again: a message id of its own, or
// the stream's duplicate window would drop it), waiting for any worker.
func (r *RemoteAgent) queue(ctx context.Context, j *remoteJob) error {
	id := j.key
	if j.requeued > 0 {
		id = fmt.Sprintf("%s#%d", j.key, j.requeued)
	}
	ack, err := r.JS.Publish(ctx, r.Names.Subject, j.msg, jetstream.WithMsgID(id))
	if err != nil {
		return fmt.Errorf("remote agent: queueing the job: %w", err)
	}
	j.seq = ack.Sequence
	j.current, j.queued = claim{}, time.Now()
	r.setJob(j.key, j.req.ItemID, nil, false)
	return nil
}

// requeue queues the job anew, for another worker.
func (r *RemoteAgent) requeue(ctx context.Context, j *remoteJob) error {
	j.requeued++
	return r.queue(ctx, j)
}

// close ends the job: taken off the queue and its worker's agent stopped
// unless its outcome was taken, its refs and shared files gone.
func (r *RemoteAgent) close(ctx context.Context, j *remoteJob) {
	if j.seq != 0 {
		if !j.done {
			r.cancel(ctx, j.key, j.seq)
		}
		r.setJob(j.key, j.req.ItemID, nil, true)
	}
	if j.claims != nil {
		_ = j.claims.Stop()
	}
	if j.results != nil {
		_ = j.results.Stop()
	}
	if j.pushed {
		r.dropRefs(ctx, j.repo, j.key)
	}
	if j.shared != nil {
		r.dropShared(ctx, j.key, j.shared, j.out.Shared)
	}
}

// waited is how a wait for the job's outcome ends: accepted (its
// outcome in the job), or with the iteration's result or an error.
type waited struct {
	accepted bool
	res      agent.Result
	err      error
}

// await waits for the outcome that counts: accepted true, with it in
// j.out; otherwise the iteration's result (the context ended, the job
// ran past its time) or why it could not go on.
func (r *RemoteAgent) await(ctx context.Context, j *remoteJob) (agent.Result, bool, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var end *waited
		select {
		case <-ctx.Done():
			return agent.Result{TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded), ExitCode: -1}, false, ctx.Err()
		case <-tick.C:
			end = r.check(ctx, j)
		case e, ok := <-j.claims.Updates():
			if !ok {
				return agent.Result{}, false, errors.New("remote agent: the claim watch ended")
			}
			r.claimed(j, e)
		case e, ok := <-j.results.Updates():
			if !ok {
				return agent.Result{}, false, errors.New("remote agent: the result watch ended")
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // the initial-values marker
			}
			c, held := r.claimOf(ctx, j.key)
			if r.consider(ctx, j, e, c, held) {
				end = &waited{accepted: true}
			}
		}
		if end != nil {
			return end.res, end.accepted, end.err
		}
	}
}

// claimed notes a worker's claim of the job.
func (r *RemoteAgent) claimed(j *remoteJob, e jetstream.KeyValueEntry) {
	var c claim
	if e == nil || e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &c) != nil || c.Cancelled || c.Done {
		return
	}
	j.current = c
	r.setJob(j.key, j.req.ItemID, &c, false)
	if j.taken.IsZero() {
		j.taken = time.Now()
	}
	fmt.Fprintf(j.w, takenLine, j.key, c.Worker, c.Host)
}

// check is the wait's tick: the outcome stored for the claim as it
// stands, unless judged (the watch may lag it, or it waits on a
// heartbeat that lapsed: a worker's beat is a request that a reconnect
// can hold up); a worker gone or revoked, a job that left the queue
// without an outcome that counts, a job nobody takes, a job held past
// its time.
func (r *RemoteAgent) check(ctx context.Context, j *remoteJob) *waited {
	if c, held := r.claimOf(ctx, j.key); held {
		if e, err := r.results.Get(ctx, resultKey(j.key, c.Proof)); err == nil && !j.judged[e.Revision()] && r.consider(ctx, j, e, c, held) {
			return &waited{accepted: true}
		}
	}
	if w := j.current.Worker; w != "" && r.Keys.Revoked(w) {
		// Refused at once: its job goes to another worker now, not when
		// its lease runs out (the revoked worker's message leaves the
		// queue; anything it reports is refused).
		r.report(j.w, "[ralph] job %s (%s): worker %s's key was revoked: the job is queued again for another worker\n", j.key, j.req.ItemID, w)
		if st, err := r.JS.Stream(ctx, r.Names.Stream); err == nil {
			_ = st.DeleteMsg(ctx, j.seq)
		}
		if err := r.requeue(ctx, j); err != nil {
			return &waited{err: err}
		}
	}
	waiting := !j.lapsed.IsZero() && time.Since(j.lapsed) < r.heartbeatLife()
	if j.current.Worker != "" && !waiting && !r.enrolled(ctx, j.current.Worker) {
		// Its worker is gone: the job comes back to the queue when its
		// lease runs out.
		j.current, j.queued, j.lapsed = claim{}, time.Now(), time.Time{}
		r.setJob(j.key, j.req.ItemID, nil, false)
	}
	if j.current.Worker == "" && r.dequeued(ctx, j.seq) {
		// Nobody holds the job and it has left the queue: its worker took
		// it off (its outcome stored, or so it thought) and is gone, or its
		// outcome did not count. Nobody would run it again: it is queued
		// anew.
		if err := r.requeue(ctx, j); err != nil {
			return &waited{err: err}
		}
		fmt.Fprintf(j.w, "[ralph] job %s left the queue without an outcome that counts: queued again\n", j.key)
	}
	if j.current.Worker == "" && time.Since(j.queued) > r.queueTimeout() {
		return &waited{err: fmt.Errorf("remote agent: job %s (%s): %w within --queue-timeout %s; start workers (ralph worker --nats …), then run the coordinator again", j.key, j.req.ItemID, ErrNoWorker, r.queueTimeout())}
	}
	if !j.taken.IsZero() && j.req.Timeout > 0 && time.Since(j.taken) > 2*j.req.Timeout+r.queueTimeout() {
		fmt.Fprintf(j.w, "\n[ralph] job %s: no outcome %s after a worker first took it: stopped\n", j.key, time.Since(j.taken).Round(time.Second))
		return &waited{res: agent.Result{TimedOut: true, ExitCode: -1, IsError: true, ErrorText: "the job ran past its timeout on the workers"}}
	}
	return nil
}

func (r *RemoteAgent) queueTimeout() time.Duration {
	if r.QueueTimeout > 0 {
		return r.QueueTimeout
	}
	return DefaultQueueTimeout
}

// consider judges an outcome against the claim as it stands (held:
// there is one; its watch may lag): true when it is the job's (j.out
// set). An outcome that does not count is reported once; one from a
// worker that could not run the job puts the job back in the queue.
func (r *RemoteAgent) consider(ctx context.Context, j *remoteJob, e jetstream.KeyValueEntry, c claim, held bool) bool {
	var o outcome
	if held {
		j.current = c
	}
	why, later := r.admit(ctx, e, j.key, j.current, &o)
	if why != "" {
		if !j.judged[e.Revision()] {
			note := ""
			if later {
				note = "; it counts if the worker's heartbeat comes back"
			}
			r.report(j.w, "[ralph] ignored an outcome for job %s (%s) from %q: %s%s\n", j.key, j.req.ItemID, o.Worker, why, note)
		}
		j.judged[e.Revision()] = !later
		if later && j.lapsed.IsZero() {
			j.lapsed = time.Now()
		}
		return false
	}
	j.judged[e.Revision()], j.lapsed = true, time.Time{}
	if o.Error != "" {
		fmt.Fprintf(j.w, "\n[ralph] worker %s could not run the job: %s; it goes back to the queue\n", o.Worker, o.Error)
		j.current, j.queued = claim{}, time.Now()
		r.setJob(j.key, j.req.ItemID, nil, false)
		return false
	}
	j.out = o
	return true
}

// errNotTheWorkers: the commit on the job's ref is not the one the
// worker reported; the job was queued again.
var errNotTheWorkers = errors.New("the job's ref holds another commit than the worker's")

// fetch brings the accepted outcome's commit here. The job's ref is
// fetched without a local ref of its own (the fast-forward keeps the
// commit); someone who moved the ref after the worker pushed gets the job
// queued again (errNotTheWorkers), never their commit taken.
func (r *RemoteAgent) fetch(ctx context.Context, j *remoteJob) error {
	out := j.out
	if !fullCommit.MatchString(out.Commit) {
		return fmt.Errorf("remote agent: worker %s reported %q as its commit", out.Worker, out.Commit)
	}
	fetch := func() error {
		r.fetching.Lock()
		defer r.fetching.Unlock()
		return j.repo.Fetch(ctx, r.Remote, jobRef(j.key, j.current.Proof))
	}
	// A fetch that fails is tried again: its connectivity check reads
	// every worktree's HEAD, and git beside it (a worktree added or
	// removed outside the listing lock) can make it fail once.
	var err error
	for try := 1; ; try++ {
		if r.Listing != nil {
			err = r.Listing(fetch)
		} else {
			err = fetch()
		}
		if err == nil || try == 3 || ctx.Err() != nil {
			break
		}
		fmt.Fprintf(j.w, "[ralph] fetching the worker's commit failed (%v): trying again\n", err)
		time.Sleep(time.Duration(try) * 200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("remote agent: fetching the worker's commit: %w", err)
	}
	if _, err := j.repo.RevParse(ctx, out.Commit+"^{commit}"); err == nil {
		return nil
	}
	// Not the agent's failure: the job runs again.
	r.report(j.w, "[ralph] job %s: the remote's %s is not worker %s's commit %s (someone else pushed there): ignored, the job is queued again\n", j.key, jobRef(j.key, j.current.Proof), out.Worker, short(out.Commit))
	if err := r.requeue(ctx, j); err != nil {
		return err
	}
	return errNotTheWorkers
}

// collect brings the worker's work into the iteration's tree: its commit
// (the tree fast-forwarded to it), its gates' results for that commit's
// tree (Attest), and the agent's edits of the shared files. The result is
// the agent's, naming the worker that ran it.
func (r *RemoteAgent) collect(ctx context.Context, j *remoteJob) (agent.Result, error) {
	out, w := j.out, j.w
	fmt.Fprintf(w, ranLine, out.Worker, out.Host, j.key)
	_, _ = io.WriteString(w, out.Output)
	if err := j.repo.MergeFastForward(ctx, out.Commit); err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: the worker's commit %s does not continue %s: %w", short(out.Commit), j.branch, err)
	}
	j.done = true
	r.finish(context.WithoutCancel(ctx), j.key, j.current)
	if len(j.job.Gates) > 0 && len(out.Gates) > 0 {
		if tree, err := j.repo.TreeOf(ctx, out.Commit); err == nil {
			r.Attest.Put(j.req.ItemID, judge.Attestation{Tree: tree, By: fmt.Sprintf("worker %s on %s", out.Worker, out.Host), Gates: j.job.Gates, Results: out.Gates})
		}
	}
	if r.Shared != nil {
		got, err := r.getShared(ctx, j.key, out.Shared, out.SharedSums)
		if err != nil {
			return agent.Result{}, err
		}
		notes, err := r.Shared.MergeShared(j.sent, got)
		if err != nil {
			return agent.Result{}, fmt.Errorf("remote agent: bringing the agent's edits of %s back: %w", strings.Join(slices.Sorted(maps.Keys(j.sent)), ", "), err)
		}
		for _, n := range notes {
			fmt.Fprintf(w, "[ralph] %s\n", n)
		}
	}
	res := out.Result
	res.Worker, res.WorkerHost = out.Worker, out.Host
	return res, nil
}

func (r *RemoteAgent) buckets(ctx context.Context) error {
	if r.results != nil {
		return nil
	}
	results, err := r.JS.KeyValue(ctx, r.Names.Results)
	if err != nil {
		return err
	}
	claims, err := r.JS.KeyValue(ctx, r.Names.Claims)
	if err != nil {
		return err
	}
	workers, err := r.JS.KeyValue(ctx, r.Names.Workers)
	if err != nil {
		return err
	}
	r.results, r.claims, r.workers = results, claims, workers
	return nil
}

// admit reads an outcome and says why it does not count ("" when it
// does): it must be the job's, at the key of the job's current claim,
// carry that claim's secret, be signed by its worker's key when the run
// has worker keys (a key not revoked), and come from a worker with a live
// heartbeat. later says the outcome may count yet: only its worker's
// heartbeat is missing.
func (r *RemoteAgent) admit(ctx context.Context, e jetstream.KeyValueEntry, key string, c claim, o *outcome) (why string, later bool) {
	if err := json.Unmarshal(e.Value(), o); err != nil {
		return "not an outcome", false
	}
	switch {
	case o.Key != key:
		return "it names job " + o.Key, false
	case c.Worker == "":
		return "no worker holds the job", false
	case o.Worker != c.Worker || e.Key() != resultKey(key, c.Proof) || proofOf(o.Secret) != c.Proof:
		return fmt.Sprintf("the job is %s's, and this report does not carry its claim's secret", c.Worker), false
	}
	if r.Keys.Any() {
		if err := r.Keys.Verify(o.Worker, o.signed(), o.Sig); err != nil {
			return err.Error(), false
		}
	}
	if !r.enrolled(ctx, o.Worker) {
		return "no such worker is enrolled (no heartbeat)", true
	}
	return "", false
}

// heartbeatLife is how long a worker's heartbeat lives: three leases.
func (r *RemoteAgent) heartbeatLife() time.Duration {
	if r.Lease > 0 {
		return 3 * r.Lease
	}
	return 3 * DefaultLease
}

// dequeued reports whether the job's message (seq) has left the queue:
// a worker acknowledged it (its outcome stored) or it was taken off.
func (r *RemoteAgent) dequeued(ctx context.Context, seq uint64) bool {
	st, err := r.JS.Stream(ctx, r.Names.Stream)
	if err != nil {
		return false
	}
	_, err = st.GetMsg(ctx, seq)
	return errors.Is(err, jetstream.ErrMsgNotFound)
}

// claimOf reads the job's claim as it stands (ok false: none, or the
// coordinator's own cancel or done mark).
func (r *RemoteAgent) claimOf(ctx context.Context, key string) (claim, bool) {
	e, err := r.claims.Get(ctx, key)
	if err != nil {
		return claim{}, false
	}
	var c claim
	if json.Unmarshal(e.Value(), &c) != nil || c.Cancelled || c.Done {
		return claim{}, false
	}
	return c, true
}

// enrolled reports whether the worker's heartbeat is live.
func (r *RemoteAgent) enrolled(ctx context.Context, worker string) bool {
	_, err := r.workers.Get(ctx, worker)
	return err == nil
}

// report writes a note to the transcript and to the coordinator's log.
func (r *RemoteAgent) report(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, args...)
	if r.Log != nil {
		fmt.Fprintf(r.Log, format, args...)
	}
}

// cancel takes an unfinished job off the queue and tells the worker that
// holds it to stop its agent.
func (r *RemoteAgent) cancel(ctx context.Context, key string, seq uint64) {
	if st, err := r.JS.Stream(ctx, r.Names.Stream); err == nil {
		_ = st.DeleteMsg(ctx, seq)
	}
	b, _ := json.Marshal(claim{Cancelled: true, At: time.Now().UTC()})
	_, _ = r.claims.Put(ctx, key, b)
}

// finish marks the job's outcome taken: a late delivery of the job is
// acknowledged without running it.
func (r *RemoteAgent) finish(ctx context.Context, key string, c claim) {
	c.Done = true
	b, _ := json.Marshal(c)
	_, _ = r.claims.Put(ctx, key, b)
}

// commitTree commits what the tree holds beyond its branch (work an
// interrupted iteration left uncommitted) so the worker starts from it;
// keepOut stays out of the commit.
func (r *RemoteAgent) commitTree(ctx context.Context, repo *git.Repo, req agent.Request, base string, keepOut []string) (string, error) {
	dirty, err := repo.StatusPorcelain(ctx, keepOut...)
	if err != nil || len(dirty) == 0 {
		return base, nil
	}
	if _, err := repo.AddAllExcept(ctx, keepOut); err != nil {
		return "", err
	}
	if !repo.HasStagedChanges(ctx) {
		return base, nil
	}
	return repo.Commit(ctx, fmt.Sprintf("wip(%s): the tree before remote iteration %d\n", req.ItemID, req.Iteration), false)
}

// jobEnvOf is what of an iteration's environment a job carries: ralph's
// own RALPH_* variables. The rest — the values of the config's env:, API
// keys among them — stays here: a worker's agent takes its credentials
// from the worker's own environment, and nothing secret crosses NATS.
func jobEnvOf(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "RALPH_") && !secretName.MatchString(name) {
			out = append(out, kv)
		}
	}
	return out
}

// secretName: a variable named like a secret stays here, RALPH_ or not.
var secretName = regexp.MustCompile(`(?i)KEY|TOKEN|SECRET|PASSW|CREDENTIAL`)

// treeEnv finds the variables of env that name dir or a path in it.
func treeEnv(env []string, dir string) map[string]string {
	var out map[string]string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		rel, err := filepath.Rel(dir, v)
		if !filepath.IsAbs(v) || err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = filepath.ToSlash(rel)
	}
	return out
}

func (r *RemoteAgent) fileStore(ctx context.Context) (jetstream.ObjectStore, error) {
	if r.files == nil {
		obs, err := r.JS.ObjectStore(ctx, r.Names.Files)
		if err != nil {
			return nil, err
		}
		r.files = obs
	}
	return r.files, nil
}

// putShared stores the files for the job; the map says which exist.
func (r *RemoteAgent) putShared(ctx context.Context, key string, files map[string][]byte) (map[string]bool, error) {
	if len(files) == 0 {
		return nil, nil
	}
	obs, err := r.fileStore(ctx)
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	for p, b := range files {
		if b != nil {
			if _, err := obs.PutBytes(ctx, sharedName(key, "in", p), b); err != nil {
				return nil, fmt.Errorf("remote agent: storing %s for the worker: %w", p, err)
			}
		}
		present[p] = b != nil
	}
	return present, nil
}

// getShared reads the files as the worker's agent left them, as the
// worker's outcome summed them.
func (r *RemoteAgent) getShared(ctx context.Context, key string, present map[string]bool, sums map[string]string) (map[string][]byte, error) {
	obs, err := r.fileStore(ctx)
	if err != nil {
		return nil, err
	}
	got := map[string][]byte{}
	for p, ok := range present {
		if !ok {
			continue
		}
		b, err := obs.GetBytes(ctx, sharedName(key, "out", p))
		if err != nil {
			return nil, fmt.Errorf("remote agent: reading the worker's %s: %w", p, err)
		}
		if proofOf(string(b)) != sums[p] {
			return nil, fmt.Errorf("remote agent: the worker's %s was changed on NATS after the worker stored it", p)
		}
		got[p] = b
	}
	return got, nil
}

func (r *RemoteAgent) dropShared(ctx context.Context, key string, in, out map[string]bool) {
	obs, err := r.fileStore(ctx)
	if err != nil {
		return
	}
	for dir, m := range map[string]map[string]bool{"in": in, "out": out} {
		for p, ok := range m {
			if ok {
				_ = obs.Delete(ctx, sharedName(key, dir, p))
			}
		}
	}
}

var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

func short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return strings.TrimSpace(s)
}
