package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/proc"
)

// Worker pulls jobs and runs them, Slots at a time, each in a tree of its
// own under Dir.
type Worker struct {
	NC    *nats.Conn
	Dir   string
	Slots int
	ID    string
	Host  string
	// Override, when set, is the worker's own agent (its --agent flags),
	// used instead of the coordinator's.
	Override     agent.Agent
	OverrideName string
	Log          io.Writer
	Runner       proc.Runner
	// RateLimitBackoff is the pause published when an agent hit a limit
	// without saying when it resets.
	RateLimitBackoff time.Duration

	js      jetstream.JetStream
	cfg     RunConfig
	run     jetstream.KeyValue
	results jetstream.KeyValue
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
	w.logf("%s connected: %d slot(s), working in %s", w.ID, w.Slots, w.Dir)
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
		if run, err := w.js.KeyValue(ctx, BucketRun); err == nil {
			if e, err := run.Get(ctx, KeyConfig); err == nil && json.Unmarshal(e.Value(), &w.cfg) == nil {
				results, rerr := w.js.KeyValue(ctx, BucketResults)
				cons, cerr := w.js.Consumer(ctx, StreamJobs, ConsumerName)
				if rerr == nil && cerr == nil {
					w.run, w.results = run, results
					return cons, nil
				}
			}
		}
		if !said {
			w.logf("waiting for a coordinator at %s", w.NC.Opts.Url)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
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
		if kv, err := w.js.KeyValue(ctx, BucketWorkers); err == nil {
			w.mu.Lock()
			var items []string
			for _, it := range w.busy {
				items = append(items, it)
			}
			w.mu.Unlock()
			sort.Strings(items)
			b, _ := json.Marshal(WorkerInfo{ID: w.ID, Host: w.Host, Slots: w.Slots, Items: items, Agent: w.OverrideName, Seen: time.Now().UTC()})
			_, _ = kv.Put(ctx, w.ID, b)
		}
		select {
		case <-ctx.Done():
			if kv, err := w.js.KeyValue(context.Background(), BucketWorkers); err == nil {
				_ = kv.Delete(context.Background(), w.ID)
			}
			return
		case <-time.After(every):
		}
	}
}

// handle runs one job: the lease is kept alive while it runs, and the
// message is acknowledged only once the outcome is stored — a worker that
// dies before that has its job delivered again, to another worker.
func (w *Worker) handle(ctx context.Context, slot int, msg jetstream.Msg) {
	var job Job
	if err := json.Unmarshal(msg.Data(), &job); err != nil || job.Key == "" {
		w.logf("dropping a malformed job: %v", err)
		_ = msg.Term()
		return
	}
	if _, err := w.results.Get(ctx, job.Key); err == nil {
		_ = msg.Ack() // reported already, by a worker whose ack was lost
		return
	}
	lease, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		every := w.beat()
		for {
			select {
			case <-lease.Done():
				return
			case <-time.After(every):
				_ = msg.InProgress()
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
	out := w.run1(ctx, slot, job)
	if ctx.Err() != nil {
		return // stopping: the job goes to another worker
	}
	out.Key, out.Worker, out.Host = job.Key, w.ID, w.Host
	b, _ := json.Marshal(out)
	if _, err := w.results.Create(ctx, job.Key, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		w.logf("%s: storing the outcome: %v", job.Item, err)
		return // not acknowledged: delivered again
	}
	_ = msg.Ack()
	if out.Error != "" {
		w.logf("%s: could not run: %s", job.Item, out.Error)
	} else {
		w.logf("%s: agent exited %d, pushed %s", job.Item, out.Result.ExitCode, short(out.Commit))
	}
}

// run1 prepares the slot's tree, waits out a shared pause, runs the agent
// and pushes what it did.
func (w *Worker) run1(ctx context.Context, slot int, job Job) Outcome {
	fail := func(err error) Outcome { return Outcome{Error: err.Error()} }
	tree, base, err := w.tree(ctx, slot, job)
	if err != nil {
		return fail(err)
	}
	origin := w.cfg.Remote
	start := base
	// A worker that died after pushing leaves its work on the story's
	// branch: the next one starts from there.
	// (Under cloneMu: a fetch reads every worktree's HEAD, and another
	// slot may be adding its worktree.)
	w.cloneMu.Lock()
	tip, err := tree.FetchInto(ctx, origin, "refs/heads/"+job.Branch, fmt.Sprintf("refs/ralph/slot-%d/branch", slot))
	w.cloneMu.Unlock()
	if err == nil && tip != base && tree.IsAncestor(ctx, base, tip) {
		start = tip
	}
	if err := tree.CheckoutDetached(ctx, start); err != nil {
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
	req := agent.Request{Prompt: job.Prompt, PromptFile: promptFile, Dir: tree.Dir, Model: job.Model, Env: job.Env, Timeout: job.Timeout,
		Transcript: &output, ItemID: job.Item, Iteration: job.Iteration, Attempt: job.Attempt, Role: job.Role}
	if req.Timeout <= 0 {
		req.Timeout = time.Hour
	}
	res, err := ag.Run(proc.WithTag(ctx, proc.TagEnv+"=worker-"+job.Key), req)
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
	if err := tree.AddAll(ctx); err != nil {
		return fail(err)
	}
	sha, err := tree.Commit(ctx, fmt.Sprintf("wip(%s): iteration %d on %s\n\nRalph-Job: %s\n", job.Item, job.Iteration, w.Host, job.Key), true)
	if err != nil {
		return fail(err)
	}
	if err := tree.PushForce(ctx, origin, sha, "refs/ralph/jobs/"+job.Key, sha, "refs/heads/"+job.Branch); err != nil {
		return fail(fmt.Errorf("pushing: %w", err))
	}
	return Outcome{Commit: sha, Result: res, Output: output.String()}
}

// tree returns the slot's work tree — a worktree of the worker's clone of
// the remote, made on first use — with the job's base fetched (refs are
// shared between a clone's worktrees: each slot has its own).
func (w *Worker) tree(ctx context.Context, slot int, job Job) (*git.Repo, string, error) {
	w.cloneMu.Lock()
	defer w.cloneMu.Unlock()
	if w.clone == nil {
		dir := filepath.Join(w.Dir, "clone")
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			w.clone = &git.Repo{Dir: dir, Runner: w.Runner}
		} else {
			if err := os.MkdirAll(w.Dir, 0o755); err != nil {
				return nil, "", err
			}
			_ = os.RemoveAll(dir)
			c, err := git.Clone(ctx, w.Runner, w.cfg.Remote, dir)
			if err != nil {
				return nil, "", fmt.Errorf("cloning %s: %w", w.cfg.Remote, err)
			}
			w.clone = c
		}
	}
	ref := fmt.Sprintf("refs/ralph/slot-%d/base", slot)
	base, err := w.clone.FetchInto(ctx, w.cfg.Remote, "refs/ralph/bases/"+job.Key, ref)
	if err != nil {
		return nil, "", fmt.Errorf("fetching the job's base: %w", err)
	}
	dir := filepath.Join(w.Dir, fmt.Sprintf("slot-%d", slot))
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return w.clone.At(dir), base, nil
	}
	_ = os.RemoveAll(dir)
	_ = w.clone.WorktreePrune(ctx)
	if _, err := w.clone.Run(ctx, "worktree", "add", "--quiet", "--detach", "--", dir, base); err != nil {
		return nil, "", fmt.Errorf("adding the slot's worktree: %w", err)
	}
	return w.clone.At(dir), base, nil
}

// waitPause holds the agent's start while a rate limit any worker saw is
// in force.
func (w *Worker) waitPause(ctx context.Context, item string) error {
	said := false
	for {
		e, err := w.run.Get(ctx, KeyRateLimit)
		if err != nil {
			return nil
		}
		var p Pause
		if json.Unmarshal(e.Value(), &p) != nil || !time.Now().Before(p.Until) {
			return nil
		}
		if !said {
			w.logf("%s: waiting until %s: %s hit a rate limit (%s)", item, p.Until.Format("15:04:05"), p.Worker, p.Message)
			said = true
		}
		wait := time.Until(p.Until)
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

func (w *Worker) publishPause(ctx context.Context, rl *agent.RateLimit) {
	until := rl.ResetAt
	if until.IsZero() {
		back := w.RateLimitBackoff
		if back <= 0 {
			back = time.Minute
		}
		until = time.Now().Add(back)
	}
	b, _ := json.Marshal(Pause{Until: until.UTC(), Message: rl.Message, Worker: w.ID})
	_, _ = w.run.Put(ctx, KeyRateLimit, b)
	w.logf("rate limit: every worker's next agent waits until %s", until.Format("15:04:05"))
}
