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
	// GatesFor, when set, names an item's gates: the worker runs them on
	// its commit, and their results go to Attest for the coordinator's
	// gate runner.
	GatesFor    func(item string) []gate.Gate
	GateTimeout time.Duration
	Attest      *Attestations
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

// Run publishes the job and waits for its outcome. The tree at req.Dir is
// pushed first (its uncommitted changes as a commit of their own); after
// the worker's report its commit is fetched and the tree fast-forwarded
// to it, so that the engine verifies the worker's work in place.
//
// Only the outcome of the worker that holds the job's claim, proved by
// the secret behind the claim, from a worker whose heartbeat is live,
// counts: anything else is ignored and reported. A worker that could not
// run the job (a failed fetch or push) puts it back in the queue: that is
// never the agent's failure. A job nobody takes within QueueTimeout stops
// the run; one a worker holds longer than the agent's timeout allows is
// the agent's timeout. Either way, and when the iteration stops, the job
// is taken off the queue and its worker's agent stopped.
func (r *RemoteAgent) Run(ctx context.Context, req agent.Request) (agent.Result, error) {
	if err := r.buckets(ctx); err != nil {
		return agent.Result{}, err
	}
	repo := r.Repo.At(req.Dir)
	branch, base, err := repo.Where(ctx)
	if err != nil || branch == "" || branch == "HEAD" || base == "" {
		return agent.Result{}, fmt.Errorf("remote agent: the tree %s is not on a branch with a commit (%v)", req.Dir, err)
	}
	key := jobKey(r.Names.Run, r.Epoch, req.Iteration, req.ItemID)
	var sent map[string][]byte
	var restore, keepOut []string
	if r.Shared != nil {
		if sent, restore, keepOut, err = r.Shared.SharedFiles(ctx); err != nil {
			return agent.Result{}, err
		}
	}
	if base, err = r.commitTree(ctx, repo, req, base, keepOut); err != nil {
		return agent.Result{}, err
	}
	shared, err := r.putShared(ctx, key, sent)
	if err != nil {
		return agent.Result{}, err
	}
	var out outcome
	if shared != nil {
		defer func() { r.dropShared(context.WithoutCancel(ctx), key, shared, out.Shared) }()
	}
	if err := repo.PushForce(ctx, r.Remote, base, "refs/ralph/bases/"+key); err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: pushing %s's start: %w", branch, err)
	}
	// The job's refs leave the remote with the job: its commit is here
	// once fetched, or no longer wanted.
	defer r.dropRefs(context.WithoutCancel(ctx), repo, key)
	results, err := r.results.Watch(ctx, key+".*")
	if err != nil {
		return agent.Result{}, err
	}
	defer results.Stop()
	claims, err := r.claims.Watch(ctx, key)
	if err != nil {
		return agent.Result{}, err
	}
	defer claims.Stop()
	job := job{Key: key, Item: req.ItemID, Role: req.Role, Iteration: req.Iteration, Attempt: req.Attempt, Branch: branch, Base: base,
		Prompt: req.Prompt, Env: jobEnvOf(req.Env), Model: req.Model, Timeout: req.Timeout, Agent: r.Spec,
		TreeEnv: treeEnv(req.Env, req.Dir), Shared: shared, Restore: restore, GateTimeout: r.GateTimeout}
	if r.GatesFor != nil && r.Attest != nil {
		job.Gates = r.GatesFor(req.ItemID)
		r.Attest.Drop(req.Dir)
	}
	w := req.Transcript
	if w == nil {
		w = io.Discard
	}
	b, _ := json.Marshal(job)
	var seq uint64 // the job's message in the stream
	queue := func(n int) error {
		id := key
		if n > 0 {
			id = fmt.Sprintf("%s#%d", key, n)
		}
		ack, err := r.JS.Publish(ctx, r.Names.Subject, b, jetstream.WithMsgID(id))
		if err != nil {
			return fmt.Errorf("remote agent: queueing the job: %w", err)
		}
		seq = ack.Sequence
		return nil
	}
	if err := queue(0); err != nil {
		return agent.Result{}, err
	}
	r.setJob(key, req.ItemID, nil, false)
	defer r.setJob(key, req.ItemID, nil, true)
	fmt.Fprintf(w, "[ralph] job %s queued for a worker (%s at %s)\n", key, branch, short(base))
	done := false
	defer func() {
		if !done {
			r.cancel(context.WithoutCancel(ctx), key, seq)
		}
	}()
	queueTimeout := r.QueueTimeout
	if queueTimeout <= 0 {
		queueTimeout = DefaultQueueTimeout
	}
	// Waiting for a worker since queued (again); held since first taken.
	queued, taken := time.Now(), time.Time{}
	var current claim
	// Outcomes already judged, by revision; one ignored only for its
	// worker's lapsed heartbeat is judged again while it waits, since
	// lapsed, for as long as a heartbeat lives.
	judged := map[uint64]bool{}
	var lapsed time.Time
	// consider judges an outcome against the claim as it stands (held:
	// there is one; its watch may lag): true when it is the job's (out
	// set).
	consider := func(e jetstream.KeyValueEntry, c claim, held bool) bool {
		var o outcome
		if held {
			current = c
		}
		why, later := r.judge(ctx, e, key, current, &o)
		if why != "" {
			if !judged[e.Revision()] {
				note := ""
				if later {
					note = "; it counts if the worker's heartbeat comes back"
				}
				r.report(w, "[ralph] ignored an outcome for job %s (%s) from %q: %s%s\n", key, req.ItemID, o.Worker, why, note)
			}
			judged[e.Revision()] = !later
			if later && lapsed.IsZero() {
				lapsed = time.Now()
			}
			return false
		}
		judged[e.Revision()], lapsed = true, time.Time{}
		if o.Error != "" {
			fmt.Fprintf(w, "\n[ralph] worker %s could not run the job: %s; it goes back to the queue\n", o.Worker, o.Error)
			current, queued = claim{}, time.Now()
			r.setJob(key, req.ItemID, nil, false)
			return false
		}
		out = o
		return true
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for requeued := 0; ; {
		for accepted := false; !accepted; {
			select {
			case <-ctx.Done():
				return agent.Result{TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded), ExitCode: -1}, ctx.Err()
			case <-tick.C:
				// The outcome stored for the claim as it stands, unless
				// judged: the watch may lag it, or it waits on a
				// heartbeat that lapsed (a worker's beat is a request
				// that a reconnect can hold up).
				if c, held := r.claimOf(ctx, key); held {
					if e, err := r.results.Get(ctx, resultKey(key, c.Proof)); err == nil && !judged[e.Revision()] && consider(e, c, held) {
						accepted = true
						continue
					}
				}
				waiting := !lapsed.IsZero() && time.Since(lapsed) < r.heartbeatLife()
				if current.Worker != "" && !waiting && !r.enrolled(ctx, current.Worker) {
					// Its worker is gone: the job comes back to the queue
					// when its lease runs out.
					current, queued, lapsed = claim{}, time.Now(), time.Time{}
					r.setJob(key, req.ItemID, nil, false)
				}
				if current.Worker == "" && r.dequeued(ctx, seq) {
					// Nobody holds the job and it has left the queue: its
					// worker took it off (its outcome stored, or so it
					// thought) and is gone, or its outcome did not count.
					// Nobody would run it again: it is queued anew.
					requeued++
					if err := queue(requeued); err != nil {
						return agent.Result{}, err
					}
					fmt.Fprintf(w, "[ralph] job %s left the queue without an outcome that counts: queued again\n", key)
					queued = time.Now()
				}
				if current.Worker == "" && time.Since(queued) > queueTimeout {
					return agent.Result{}, fmt.Errorf("remote agent: job %s (%s): %w within --queue-timeout %s; start workers (ralph worker --nats …), then run the coordinator again", key, req.ItemID, ErrNoWorker, queueTimeout)
				}
				if !taken.IsZero() && req.Timeout > 0 && time.Since(taken) > 2*req.Timeout+queueTimeout {
					fmt.Fprintf(w, "\n[ralph] job %s: no outcome %s after a worker first took it: stopped\n", key, time.Since(taken).Round(time.Second))
					return agent.Result{TimedOut: true, ExitCode: -1, IsError: true, ErrorText: "the job ran past its timeout on the workers"}, nil
				}
			case e, ok := <-claims.Updates():
				if !ok {
					return agent.Result{}, errors.New("remote agent: the claim watch ended")
				}
				var c claim
				if e == nil || e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &c) != nil || c.Cancelled || c.Done {
					continue
				}
				current = c
				r.setJob(key, req.ItemID, &c, false)
				if taken.IsZero() {
					taken = time.Now()
				}
				fmt.Fprintf(w, takenLine, key, c.Worker, c.Host)
			case e, ok := <-results.Updates():
				if !ok {
					return agent.Result{}, errors.New("remote agent: the result watch ended")
				}
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue // the initial-values marker
				}
				c, held := r.claimOf(ctx, key)
				accepted = consider(e, c, held)
			}
		}
		if !fullCommit.MatchString(out.Commit) {
			return agent.Result{}, fmt.Errorf("remote agent: worker %s reported %q as its commit", out.Worker, out.Commit)
		}
		// The job's ref is fetched without a local ref of its own (the
		// fast-forward keeps the commit); the fast-forward to the commit
		// the worker reported fails unless the fetch brought it.
		fetch := func() error {
			r.fetching.Lock()
			defer r.fetching.Unlock()
			return repo.Fetch(ctx, r.Remote, jobRef(key, current.Proof))
		}
		// A fetch that fails is tried again: its connectivity check reads
		// every worktree's HEAD, and git beside it (a worktree added or
		// removed outside the listing lock) can make it fail once.
		for try := 1; ; try++ {
			if r.Listing != nil {
				err = r.Listing(fetch)
			} else {
				err = fetch()
			}
			if err == nil || try == 3 || ctx.Err() != nil {
				break
			}
			fmt.Fprintf(w, "[ralph] fetching the worker's commit failed (%v): trying again\n", err)
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		}
		if err != nil {
			return agent.Result{}, fmt.Errorf("remote agent: fetching the worker's commit: %w", err)
		}
		if _, err := repo.RevParse(ctx, out.Commit+"^{commit}"); err == nil {
			break
		}
		// Someone moved the job's ref after the worker pushed: what the
		// remote holds is not the worker's commit. Not the agent's
		// failure: the job runs again.
		r.report(w, "[ralph] job %s: the remote's %s is not worker %s's commit %s (someone else pushed there): ignored, the job is queued again\n", key, jobRef(key, current.Proof), out.Worker, short(out.Commit))
		requeued++
		if err := queue(requeued); err != nil {
			return agent.Result{}, err
		}
		current, queued = claim{}, time.Now()
		r.setJob(key, req.ItemID, nil, false)
	}
	fmt.Fprintf(w, ranLine, out.Worker, out.Host, key)
	_, _ = io.WriteString(w, out.Output)
	if err := repo.MergeFastForward(ctx, out.Commit); err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: the worker's commit %s does not continue %s: %w", short(out.Commit), branch, err)
	}
	done = true
	r.finish(context.WithoutCancel(ctx), key, current)
	if len(job.Gates) > 0 && len(out.Gates) > 0 {
		r.Attest.Put(req.Dir, out.Commit, out.Worker, out.Host, job.Gates, out.Gates, keepOut)
	}
	if r.Shared != nil {
		got, err := r.getShared(ctx, key, out.Shared, out.SharedSums)
		if err != nil {
			return agent.Result{}, err
		}
		notes, err := r.Shared.MergeShared(sent, got)
		if err != nil {
			return agent.Result{}, fmt.Errorf("remote agent: bringing the agent's edits of %s back: %w", strings.Join(slices.Sorted(maps.Keys(sent)), ", "), err)
		}
		for _, n := range notes {
			fmt.Fprintf(w, "[ralph] %s\n", n)
		}
	}
	return out.Result, nil
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

// judge reads an outcome and says why it does not count ("" when it
// does): it must be the job's, at the key of the job's current claim,
// carry that claim's secret, and come from a worker with a live
// heartbeat. later says the outcome may count yet: only its worker's
// heartbeat is missing.
func (r *RemoteAgent) judge(ctx context.Context, e jetstream.KeyValueEntry, key string, c claim, o *outcome) (why string, later bool) {
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
