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
	results     jetstream.KeyValue
	files       jetstream.ObjectStore
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
	return agent.Invocation{Note: fmt.Sprintf("a worker runs %s on the job from the NATS queue %s", r.Spec.Name, subjectJobs)}, nil
}

// Run publishes the job and waits for its outcome. The tree at req.Dir is
// pushed first (its uncommitted changes as a commit of their own); after
// the worker's report its commit is fetched and the tree fast-forwarded
// to it, so that the engine verifies the worker's work in place.
func (r *RemoteAgent) Run(ctx context.Context, req agent.Request) (agent.Result, error) {
	if r.results == nil {
		kv, err := r.JS.KeyValue(ctx, bucketResults)
		if err != nil {
			return agent.Result{}, err
		}
		r.results = kv
	}
	repo := r.Repo.At(req.Dir)
	branch, base, err := repo.Where(ctx)
	if err != nil || branch == "" || branch == "HEAD" || base == "" {
		return agent.Result{}, fmt.Errorf("remote agent: the tree %s is not on a branch with a commit (%v)", req.Dir, err)
	}
	key := jobKey(r.Epoch, req.Iteration, req.ItemID)
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
	if err := repo.PushForce(ctx, r.Remote, base, "refs/heads/"+branch, base, "refs/ralph/bases/"+key); err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: pushing %s: %w", branch, err)
	}
	watch, err := r.results.Watch(ctx, key)
	if err != nil {
		return agent.Result{}, err
	}
	defer watch.Stop()
	job := job{Key: key, Item: req.ItemID, Role: req.Role, Iteration: req.Iteration, Attempt: req.Attempt, Branch: branch, Base: base,
		Prompt: req.Prompt, Env: jobEnvOf(req.Env), Model: req.Model, Timeout: req.Timeout, Agent: r.Spec,
		TreeEnv: treeEnv(req.Env, req.Dir), Shared: shared, Restore: restore, GateTimeout: r.GateTimeout}
	if r.GatesFor != nil && r.Attest != nil {
		job.Gates = r.GatesFor(req.ItemID)
		r.Attest.Drop(req.Dir)
	}
	b, _ := json.Marshal(job)
	if _, err := r.JS.Publish(ctx, subjectJobs, b, jetstream.WithMsgID(key)); err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: queueing the job: %w", err)
	}
	if req.Transcript != nil {
		fmt.Fprintf(req.Transcript, "[ralph] job %s queued for a worker (%s at %s)\n", key, branch, short(base))
	}
	for {
		select {
		case <-ctx.Done():
			return agent.Result{TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded), ExitCode: -1}, ctx.Err()
		case e, ok := <-watch.Updates():
			if !ok {
				return agent.Result{}, errors.New("remote agent: the result watch ended")
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // the initial-values marker
			}
			if err := json.Unmarshal(e.Value(), &out); err != nil {
				return agent.Result{}, fmt.Errorf("remote agent: a malformed outcome for %s: %w", key, err)
			}
		}
		break
	}
	w := req.Transcript
	if w == nil {
		w = io.Discard
	}
	fmt.Fprintf(w, "[ralph] worker %s on %s ran job %s\n", out.Worker, out.Host, key)
	_, _ = io.WriteString(w, out.Output)
	if out.Error != "" {
		fmt.Fprintf(w, "\n[ralph] the worker could not run the job: %s\n", out.Error)
		return agent.Result{ExitCode: 1, IsError: true, ErrorText: "worker " + out.Worker + ": " + out.Error}, nil
	}
	// The job's ref is fetched without a local ref of its own (the
	// fast-forward keeps the commit); the fast-forward to the commit the
	// worker reported fails unless the fetch brought it.
	fetch := func() error {
		r.fetching.Lock()
		defer r.fetching.Unlock()
		return repo.Fetch(ctx, r.Remote, "refs/ralph/jobs/"+key)
	}
	if r.Listing != nil {
		err = r.Listing(fetch)
	} else {
		err = fetch()
	}
	if err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: fetching the worker's commit: %w", err)
	}
	if !fullCommit.MatchString(out.Commit) {
		return agent.Result{}, fmt.Errorf("remote agent: worker %s reported %q as its commit", out.Worker, out.Commit)
	}
	if err := repo.MergeFastForward(ctx, out.Commit); err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: the worker's commit %s does not continue %s: %w", short(out.Commit), branch, err)
	}
	if len(job.Gates) > 0 && len(out.Gates) > 0 {
		r.Attest.Put(req.Dir, out.Commit, out.Worker, out.Host, job.Gates, out.Gates, keepOut)
	}
	if r.Shared != nil {
		got, err := r.getShared(ctx, key, out.Shared)
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
		obs, err := r.JS.ObjectStore(ctx, bucketFiles)
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

// getShared reads the files as the worker's agent left them.
func (r *RemoteAgent) getShared(ctx context.Context, key string, present map[string]bool) (map[string][]byte, error) {
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
