package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
)

// Worker pulls jobs and runs them, Slots at a time, each in a tree of its
// own under Dir.
type Worker struct {
	NC *nats.Conn
	// RunName is the run to work for (its name, as the coordinator
	// prints it); "" takes the one run that has a coordinator.
	RunName string
	Dir     string
	Slots   int
	ID      string
	Host    string
	// Override, when set, is the worker's own agent (its --agent flags),
	// used instead of the coordinator's.
	Override     agent.Agent
	OverrideName string
	Log          io.Writer
	Runner       proc.Runner
	// RateLimitBackoff is the pause published when an agent hit a limit
	// without saying when it resets.
	RateLimitBackoff time.Duration
	// ConfineAgent and ConfineGates, when set, put each job's agent (with
	// the base URL the job gives it, its model's API) and gates in the
	// sandbox (the CLI's; nil: unconfined).
	ConfineAgent func(a agent.Agent, baseURL string) agent.Agent
	ConfineGates func(proc.Runner) proc.Runner
	// Mark, when set (KEY=VALUE), is put on every process a job starts,
	// so that a guard can stop them all when the worker dies.
	Mark string
	// Key, when set, is the worker's own key (ID is its name): every
	// report is signed with it. A run whose coordinator has worker keys
	// counts no other.
	Key *Key

	js      jetstream.JetStream
	names   Names
	cfg     RunConfig
	run     jetstream.KeyValue
	results jetstream.KeyValue
	workers jetstream.KeyValue
	claims  jetstream.KeyValue
	files   jetstream.ObjectStore
	mu      sync.Mutex
	busy    map[int]string
	clone   *git.Repo
	cloneMu sync.Mutex
}

func (w *Worker) logf(format string, args ...any) {
	if w.Log != nil {
		fmt.Fprintf(w.Log, "%s ralph worker: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

// Run works until ctx ends. It first waits for a coordinator to have set
// up the run (a worker may start first).
func (w *Worker) Run(ctx context.Context) error {
	if w.Slots < 1 {
		w.Slots = 1
	}
	if w.Runner == nil {
		w.Runner = proc.Exec{}
	}
	w.busy = map[int]string{}
	js, err := jetstream.New(w.NC)
	if err != nil {
		return err
	}
	w.js = js
	cons, err := w.waitForCoordinator(ctx)
	if err != nil {
		return err
	}
	w.logf("%s connected to run %s: %d slot(s), working in %s", w.ID, w.names.Run, w.Slots, w.Dir)
	go w.warm(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.heartbeat(ctx) }()
	for slot := 0; slot < w.Slots; slot++ {
		wg.Add(1)
		go func(slot int) {
			defer wg.Done()
			for ctx.Err() == nil {
				msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
						time.Sleep(200 * time.Millisecond)
					}
					continue
				}
				w.handle(ctx, slot, msg)
			}
		}(slot)
	}
	wg.Wait()
	return nil
}

func (w *Worker) waitForCoordinator(ctx context.Context) (jetstream.Consumer, error) {
	said := false
	for {
		run, err := w.findRun(ctx)
		if err != nil {
			return nil, err
		}
		if run != "" {
			n := NamesFor(run)
			if settings, err := w.js.KeyValue(ctx, n.Settings); err == nil {
				// Setup makes every bucket before it publishes the config.
				if e, err := settings.Get(ctx, keyConfig); err == nil && json.Unmarshal(e.Value(), &w.cfg) == nil {
					if w.cfg.Signed && w.Key == nil {
						return nil, fmt.Errorf("%w: the coordinator of run %s counts only reports signed with a worker's own key: start this worker with --key FILE (made by `ralph cluster key add NAME` on the coordinator's machine)", ErrNeedsKey, n.Run)
					}
					results, rerr := w.js.KeyValue(ctx, n.Results)
					workers, werr := w.js.KeyValue(ctx, n.Workers)
					files, ferr := w.js.ObjectStore(ctx, n.Files)
					claims, clerr := w.js.KeyValue(ctx, n.Claims)
					cons, cerr := w.js.Consumer(ctx, n.Stream, n.Consumer)
					if err := errors.Join(rerr, werr, ferr, clerr, cerr); err == nil {
						w.names, w.run, w.results, w.workers, w.files, w.claims = n, settings, results, workers, files, claims
						return cons, nil
					}
				}
			}
		}
		if !said {
			w.logf("waiting for a coordinator at %s", strings.Join(w.NC.Opts.Servers, ", "))
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// findRun is the run to work for: the one named, or the one run with a
// coordinator ("" while there is none). Several are an error: the
// worker must be told which.
func (w *Worker) findRun(ctx context.Context) (string, error) {
	if w.RunName != "" {
		return SafeID(w.RunName), nil
	}
	kv, err := w.js.KeyValue(ctx, bucketLeases)
	if err != nil {
		return "", nil
	}
	keys, err := kv.Keys(ctx)
	if err != nil {
		return "", nil
	}
	var live []string
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		var h Holder
		if err == nil && json.Unmarshal(e.Value(), &h) == nil && time.Now().Before(h.Expires) {
			live = append(live, k)
		}
	}
	switch len(live) {
	case 0:
		return "", nil
	case 1:
		return live[0], nil
	}
	sort.Strings(live)
	return "", fmt.Errorf("%d runs have a coordinator on this NATS (%s): give --run", len(live), strings.Join(live, ", "))
}

// beat is how often a worker renews its lease and its heartbeat: a third
// of the lease.
func (w *Worker) beat() time.Duration {
	if every := w.cfg.Lease / 3; every > 0 {
		return every
	}
	return time.Second
}

func (w *Worker) heartbeat(ctx context.Context) {
	every := w.beat()
	for {
		w.mu.Lock()
		var items []string
		for _, it := range w.busy {
			items = append(items, it)
		}
		w.mu.Unlock()
		sort.Strings(items)
		b, _ := json.Marshal(WorkerInfo{ID: w.ID, Host: w.Host, Slots: w.Slots, Items: items, Agent: w.OverrideName, Seen: time.Now().UTC()})
		// A beat lost in a reconnect must not hold up the next: the
		// request waits no longer than a beat.
		beatCtx, cancel := context.WithTimeout(ctx, every)
		_, _ = w.workers.Put(beatCtx, w.ID, b)
		cancel()
		select {
		case <-ctx.Done():
			_ = w.workers.Delete(context.Background(), w.ID)
			return
		case <-time.After(every):
		}
	}
}

// ErrNeedsKey is the error of a worker without a key for a run that
// counts only signed reports.
var ErrNeedsKey = errors.New("this worker has no key")

// Why a job's run stopped before its end.
var (
	errCancelled = errors.New("the coordinator cancelled the job")
	errTaken     = errors.New("the job went to another worker (this one's lease ran out)")
)

// handle runs one job. The worker claims it first — with the hash of a
// secret that only its outcome will carry, so that nobody else can report
// for it — and keeps its lease alive while it runs; the message is
// acknowledged only once the outcome is stored: a worker that dies before
// that has its job delivered again, to another worker. A job that could
// not run goes back to the queue. A job the coordinator cancels, or that
// went to another worker, stops at once, its agent with it.
func (w *Worker) handle(ctx context.Context, slot int, msg jetstream.Msg) {
	var job job
	if err := json.Unmarshal(msg.Data(), &job); err != nil || job.Key == "" || strings.ContainsAny(job.Key, ".*> ") {
		w.logf("dropping a malformed job: %v", err)
		_ = msg.Term()
		return
	}
	if c, ok := w.claimOf(ctx, job.Key); ok && (c.Done || c.Cancelled) {
		_ = msg.Ack() // reported already, or no longer wanted
		return
	}
	var delivery uint64
	if meta, err := msg.Metadata(); err == nil {
		delivery = meta.NumDelivered
	}
	secret, err := randomHex()
	if err != nil {
		return
	}
	proof := proofOf(secret)
	b, _ := json.Marshal(claim{Worker: w.ID, Host: w.Host, Proof: proof, Delivery: delivery, At: time.Now().UTC()})
	if _, err := w.claims.Put(ctx, job.Key, b); err != nil {
		w.logf("%s: claiming job %s: %v", job.Item, job.Key, err)
		_ = msg.Nak()
		return
	}
	jobCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() {
		every := w.beat()
		for {
			select {
			case <-jobCtx.Done():
				return
			case <-time.After(every):
				_ = msg.InProgress()
				if c, ok := w.claimOf(jobCtx, job.Key); ok && c.Cancelled {
					stop(errCancelled)
				} else if ok && c.Proof != proof {
					stop(errTaken)
				}
			}
		}
	}()
	w.mu.Lock()
	w.busy[slot] = job.Item
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.busy, slot)
		w.mu.Unlock()
	}()
	w.logf("%s: iteration %d (attempt %d) from %s", job.Item, job.Iteration, job.Attempt, short(job.Base))
	out := w.run1(jobCtx, slot, job, proof)
	if ctx.Err() != nil {
		return // stopping: the job goes to another worker
	}
	if cause := context.Cause(jobCtx); cause != nil {
		w.logf("%s: stopped: %v", job.Item, cause)
		if errors.Is(cause, errCancelled) {
			_ = msg.Term()
		}
		return
	}
	out.Key, out.Worker, out.Host, out.Secret = job.Key, w.ID, w.Host, secret
	if err := w.Key.signOutcome(&out); err != nil {
		w.logf("%s: signing the outcome: %v", job.Item, err)
		return // not acknowledged: delivered again
	}
	b, _ = json.Marshal(out)
	if _, err := w.results.Put(ctx, resultKey(job.Key, proof), b); err != nil {
		w.logf("%s: storing the outcome: %v", job.Item, err)
		return // not acknowledged: delivered again
	}
	if out.Error != "" {
		w.logf("%s: could not run: %s (the job goes back to the queue)", job.Item, out.Error)
		_ = msg.NakWithDelay(w.beat())
		return
	}
	_ = msg.Ack()
	w.logf("%s: agent exited %d, pushed %s", job.Item, out.Result.ExitCode, short(out.Commit))
}

// claimOf reads the job's claim.
func (w *Worker) claimOf(ctx context.Context, key string) (claim, bool) {
	e, err := w.claims.Get(ctx, key)
	if err != nil {
		return claim{}, false
	}
	var c claim
	return c, json.Unmarshal(e.Value(), &c) == nil
}

func randomHex() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// run1 prepares the slot's tree, waits out a shared pause, runs the agent
// and pushes what it did.
func (w *Worker) run1(ctx context.Context, slot int, job job, proof string) outcome {
	fail := func(err error) outcome { return outcome{Error: err.Error()} }
	began := time.Now()
	// Always from the coordinator's base: what else is on the remote may
	// be anyone's.
	tree, start, err := w.tree(ctx, slot, job)
	if err != nil {
		return fail(err)
	}
	origin := w.cfg.Remote
	if err := tree.CheckoutDetached(ctx, start); err != nil {
		return fail(err)
	}
	if err := w.getShared(ctx, tree.Dir, job); err != nil {
		return fail(err)
	}
	if err := w.waitPause(ctx, job.Item); err != nil {
		return fail(err)
	}
	ag := w.Override
	if ag == nil {
		if ag, err = job.Agent.Build(); err != nil {
			return fail(err)
		}
	}
	if w.ConfineAgent != nil {
		base := job.Agent.BaseURL
		if w.Override != nil {
			base = ""
		}
		ag = w.ConfineAgent(ag, base)
	}
	promptDir, err := os.MkdirTemp("", "ralph-job-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(promptDir)
	promptFile := filepath.Join(promptDir, "PROMPT.md")
	if err := os.WriteFile(promptFile, []byte(job.Prompt), 0o600); err != nil {
		return fail(err)
	}
	var output capped
	req := agent.Request{Prompt: job.Prompt, PromptFile: promptFile, Dir: tree.Dir, Model: job.Model, Env: jobEnv(job, tree.Dir, promptFile), Timeout: job.Timeout,
		Transcript: &output, ItemID: job.Item, Iteration: job.Iteration, Attempt: job.Attempt, Role: job.Role}
	if req.Timeout <= 0 {
		req.Timeout = time.Hour
	}
	res, err := ag.Run(w.tagged(ctx, job), req)
	if err != nil && ctx.Err() != nil {
		return fail(ctx.Err())
	}
	if err != nil {
		res.IsError, res.ErrorText = true, err.Error()
	}
	if pids := proc.KillTagged(proc.TagEnv+"=worker-"+job.Key, false); len(pids) > 0 {
		fmt.Fprintf(&output, "\n[ralph worker] killed %d process(es) the agent left running\n", len(pids))
	}
	if res.RateLimit != nil {
		w.publishPause(ctx, res.RateLimit)
	}
	shared, sums, err := w.putShared(ctx, tree, start, job)
	if err != nil {
		return fail(err)
	}
	if err := tree.AddAll(ctx); err != nil {
		return fail(err)
	}
	sha, err := tree.Commit(ctx, fmt.Sprintf("wip(%s): iteration %d on %s\n\nRalph-Job: %s\n", job.Item, job.Iteration, w.Host, job.Key), true)
	if err != nil {
		return fail(err)
	}
	gates := w.runGates(ctx, tree, sha, job, &output, began)
	if ctx.Err() != nil {
		return fail(ctx.Err()) // the job is no longer this worker's
	}
	if err := tree.PushForce(ctx, origin, sha, jobRef(job.Key, proof)); err != nil {
		return fail(fmt.Errorf("pushing: %w", err))
	}
	return outcome{Commit: sha, Result: res, Output: output.String(), Shared: shared, SharedSums: sums, Gates: gates}
}

// runGates runs the job's gates on the commit just made; their log goes
// with the agent's output. Results are reported only for a tree the gates
// left as committed (build output ignored by git is fine): otherwise they
// would not be the results of the commit, and the coordinator runs the
// gates itself.
//
// Nor are they reported for a tree where the commit is not exactly what
// the gates would read: a file whose committed bytes differ from the
// tree's (a git filter), or a file git ignores that the job wrote (a test
// hidden by .git/info/exclude, a replaced runner in node_modules). The
// coordinator then judges the commit itself, with those set aside.
func (w *Worker) runGates(ctx context.Context, tree *git.Repo, sha string, job job, log io.Writer, began time.Time) []gate.Result {
	if len(job.Gates) == 0 {
		return nil
	}
	if why := notAttestable(ctx, tree, began); why != "" {
		fmt.Fprintf(log, "\n[ralph worker] gates not run here (%s): the coordinator runs them itself\n", why)
		return nil
	}
	fmt.Fprintf(log, "\n[ralph worker] gates on %s\n", short(sha))
	tag := proc.TagEnv + "=worker-" + job.Key
	runner := gate.Runner{Proc: w.Runner, Timeout: job.GateTimeout}
	if w.ConfineGates != nil {
		runner.Proc = w.ConfineGates(w.Runner)
	}
	results, _ := runner.Run(w.tagged(ctx, job), tree.Dir, job.Gates, log)
	proc.KillTagged(tag, false)
	if dirty, err := tree.StatusPorcelain(ctx); err != nil || len(dirty) > 0 {
		fmt.Fprintf(log, "\n[ralph worker] the gates changed the tree (%s): the coordinator runs them itself\n", strings.Join(dirty, ", "))
		return nil
	}
	return results
}

// tagged marks what a job starts: with the job's tag (its leftovers are
// killed when it ends) and the worker's Mark.
func (w *Worker) tagged(ctx context.Context, job job) context.Context {
	tags := []string{proc.TagEnv + "=worker-" + job.Key}
	if w.Mark != "" {
		tags = append(tags, w.Mark)
	}
	return proc.WithTag(ctx, tags...)
}

// jobEnv is the agent's environment: the job's, with the variables that
// name a path in the coordinator's tree pointed into this one, and this
// ralph on PATH (after the worker's own) for the agent's ralph commands.
func jobEnv(job job, dir, promptFile string) []string {
	env := make([]string, 0, len(job.Env)+1)
	for _, kv := range job.Env {
		k, _, _ := strings.Cut(kv, "=")
		switch rel, ok := job.TreeEnv[k]; {
		case k == "RALPH_PROMPT_FILE":
			kv = k + "=" + promptFile
		case ok:
			kv = k + "=" + filepath.Join(dir, filepath.FromSlash(rel))
		}
		env = append(env, kv)
	}
	if exe, err := os.Executable(); err == nil {
		env = append(env, "PATH="+os.Getenv("PATH")+string(os.PathListSeparator)+filepath.Dir(exe))
	}
	return env
}

// getShared puts the job's shared files into the tree as the coordinator
// sent them.
func (w *Worker) getShared(ctx context.Context, dir string, job job) error {
	for p, present := range job.Shared {
		path, err := inTree(dir, p)
		if err != nil {
			return err
		}
		if !present {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		b, err := w.files.GetBytes(ctx, sharedName(job.Key, "in", p))
		if err != nil {
			return fmt.Errorf("reading the job's %s: %w", p, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// putShared stores the shared files as the agent left them, then puts
// back the job's Restore paths as the commit the agent started from had
// them, so that none of it is committed.
func (w *Worker) putShared(ctx context.Context, tree *git.Repo, start string, job job) (map[string]bool, map[string]string, error) {
	var out map[string]bool
	var sums map[string]string
	if len(job.Shared) > 0 {
		out, sums = map[string]bool{}, map[string]string{}
		for p := range job.Shared {
			path, err := inTree(tree.Dir, p)
			if err != nil {
				return nil, nil, err
			}
			b, err := os.ReadFile(path)
			if errors.Is(err, os.ErrNotExist) {
				out[p] = false
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			if _, err := w.files.PutBytes(ctx, sharedName(job.Key, "out", p), b); err != nil {
				return nil, nil, fmt.Errorf("storing %s for the coordinator: %w", p, err)
			}
			out[p], sums[p] = true, proofOf(string(b))
		}
	}
	for _, p := range job.Restore {
		path, err := inTree(tree.Dir, p)
		if err != nil {
			return nil, nil, err
		}
		if tree.HasPath(ctx, start, p) {
			err = tree.RestorePath(ctx, start, p)
		} else if err = os.Remove(path); errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("putting %s back: %w", p, err)
		}
	}
	return out, sums, nil
}

// inTree is the path p of a job inside dir; a path that leaves the tree
// is refused (the job comes over the network).
func inTree(dir, p string) (string, error) {
	if !filepath.IsLocal(filepath.FromSlash(p)) {
		return "", fmt.Errorf("the job names %q, which is not a path inside the tree", p)
	}
	return filepath.Join(dir, filepath.FromSlash(p)), nil
}

// tree returns the slot's work tree — a worktree of the worker's clone of
// the remote, made on first use — with the job's base fetched (refs are
// shared between a clone's worktrees: each slot has its own). The fetch
// runs under cloneMu: it reads every worktree's HEAD, and another slot may
// be adding its worktree.
func (w *Worker) tree(ctx context.Context, slot int, job job) (tree *git.Repo, base string, err error) {
	w.cloneMu.Lock()
	defer w.cloneMu.Unlock()
	if err := w.ensureClone(ctx); err != nil {
		return nil, "", err
	}
	baseRef := fmt.Sprintf("refs/ralph/slot-%d/base", slot)
	if err := w.clone.FetchRefs(ctx, w.cfg.Remote, "refs/ralph/bases/"+job.Key, baseRef); err != nil {
		return nil, "", fmt.Errorf("fetching the job's base: %w", err)
	}
	if base, err = w.clone.RevParse(ctx, baseRef); err != nil {
		return nil, "", err
	}
	if base != job.Base {
		return nil, "", fmt.Errorf("the job's base on the remote is %s, not the coordinator's %s", short(base), short(job.Base))
	}
	tree, err = w.ensureSlot(ctx, slot, base)
	return tree, base, err
}

// warm clones the remote and adds the slots' trees as soon as the run is
// known, so the first jobs start without waiting for them.
func (w *Worker) warm(ctx context.Context) {
	w.cloneMu.Lock()
	defer w.cloneMu.Unlock()
	if w.ensureClone(ctx) != nil {
		return // the first job says why
	}
	head, err := w.clone.RevParse(ctx, "HEAD")
	if err != nil {
		return // an empty remote
	}
	for slot := 0; slot < w.Slots; slot++ {
		if _, err := w.ensureSlot(ctx, slot, head); err != nil {
			return
		}
	}
}

// ensureClone makes the worker's clone of the remote (under cloneMu).
// Like the main repository, it lists .ralph/ in its info/exclude: what
// ralph keeps in a job's tree (an agent CLI's private home, with its
// session logs) is never committed.
func (w *Worker) ensureClone(ctx context.Context) error {
	if w.clone != nil {
		return nil
	}
	dir := filepath.Join(w.Dir, "clone")
	c := &git.Repo{Dir: dir, Runner: w.Runner}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		if err := os.MkdirAll(w.Dir, 0o755); err != nil {
			return err
		}
		_ = os.RemoveAll(dir)
		if c, err = git.Clone(ctx, w.Runner, w.cfg.Remote, dir); err != nil {
			return fmt.Errorf("cloning %s: %w", w.cfg.Remote, err)
		}
	}
	if err := c.EnsureExcluded(ctx, "/.ralph/"); err != nil {
		return fmt.Errorf("listing .ralph/ in the clone's info/exclude: %w", err)
	}
	w.clone = c
	return nil
}

// ensureSlot returns the slot's worktree, adding it at rev when it is not
// there (under cloneMu).
func (w *Worker) ensureSlot(ctx context.Context, slot int, rev string) (*git.Repo, error) {
	dir := filepath.Join(w.Dir, fmt.Sprintf("slot-%d", slot))
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return w.clone.At(dir), nil
	}
	_ = os.RemoveAll(dir)
	_ = w.clone.WorktreePrune(ctx)
	if _, err := w.clone.Run(ctx, "worktree", "add", "--quiet", "--detach", "--", dir, rev); err != nil {
		return nil, fmt.Errorf("adding the slot's worktree: %w", err)
	}
	return w.clone.At(dir), nil
}

// waitPause holds the agent's start while a rate limit any worker saw is
// in force — at most the run's MaxPause from when it was set, whatever
// reset time it names.
func (w *Worker) waitPause(ctx context.Context, item string) error {
	said := false
	for {
		e, err := w.run.Get(ctx, keyRateLimit)
		if err != nil {
			return nil
		}
		var p pause
		if json.Unmarshal(e.Value(), &p) != nil {
			return nil
		}
		until := boundPause(p.Until, e.Created(), w.cfg.MaxPause)
		if !time.Now().Before(until) {
			return nil
		}
		if !said {
			note := ""
			if until.Before(p.Until) {
				note = fmt.Sprintf(", not %s as it said: pauses last at most %s", p.Until.Local().Format(pauseTime), w.maxPause())
			}
			w.logf("%s: waiting until %s: %s hit a rate limit (%s)%s", item, until.Local().Format(pauseTime), p.Worker, p.Message, note)
			said = true
		}
		wait := time.Until(until)
		if wait > time.Second {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// pauseTime is how a pause's end is shown: with its date, which may not
// be today's.
const pauseTime = "2006-01-02 15:04:05 MST"

func (w *Worker) maxPause() time.Duration {
	if w.cfg.MaxPause > 0 {
		return w.cfg.MaxPause
	}
	return DefaultMaxPause
}

// boundPause is a pause's end: until, but no later than max after it was
// set.
func boundPause(until, set time.Time, max time.Duration) time.Time {
	if max <= 0 {
		max = DefaultMaxPause
	}
	if limit := set.Add(max); until.After(limit) {
		return limit
	}
	return until
}

func (w *Worker) publishPause(ctx context.Context, rl *agent.RateLimit) {
	until := rl.ResetAt
	if until.IsZero() {
		back := w.RateLimitBackoff
		if back <= 0 {
			back = time.Minute
		}
		until = time.Now().Add(back)
	}
	b, _ := json.Marshal(pause{Until: until.UTC(), Message: rl.Message, Worker: w.ID})
	_, _ = w.run.Put(ctx, keyRateLimit, b)
	w.logf("rate limit: every worker's next agent waits until %s", boundPause(until, time.Now(), w.cfg.MaxPause).Local().Format(pauseTime))
}

// notAttestable says why the gates' results on tree would not be the
// results of its commit ("" when they would).
func notAttestable(ctx context.Context, tree *git.Repo, began time.Time) string {
	differ, err := tree.NotAsStaged(ctx, func(p string) bool { return git.WrittenSince(filepath.Join(tree.Dir, p), began) })
	if err != nil {
		return err.Error()
	}
	if len(differ) > 0 {
		return "committed bytes differ from the tree's: " + strings.Join(differ, ", ")
	}
	ignored, err := tree.IgnoredFiles(ctx, ".ralph")
	if err != nil {
		return err.Error()
	}
	for _, p := range ignored {
		if git.WrittenSince(filepath.Join(tree.Dir, p), began) {
			return "the job wrote files git ignores, such as " + p
		}
	}
	return ""
}
