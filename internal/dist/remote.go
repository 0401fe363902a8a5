package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/agent"
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
	results jetstream.KeyValue
}

func (r *RemoteAgent) Name() string { return r.Spec.Name }

func (r *RemoteAgent) Plan(req agent.Request) (agent.Invocation, error) {
	return agent.Invocation{Note: fmt.Sprintf("a worker runs %s on the job from the NATS queue %s", r.Spec.Name, SubjectJobs)}, nil
}

// Run publishes the job and waits for its outcome. The tree at req.Dir is
// pushed first (its uncommitted changes as a commit of their own); after
// the worker's report its commit is fetched and the tree fast-forwarded
// to it, so that the engine verifies the worker's work in place.
func (r *RemoteAgent) Run(ctx context.Context, req agent.Request) (agent.Result, error) {
	if r.results == nil {
		kv, err := r.JS.KeyValue(ctx, BucketResults)
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
	if dirty, err := repo.StatusPorcelain(ctx); err == nil && len(dirty) > 0 {
		if err := repo.AddAll(ctx); err != nil {
			return agent.Result{}, err
		}
		if base, err = repo.Commit(ctx, fmt.Sprintf("wip(%s): the tree before remote iteration %d\n", req.ItemID, req.Iteration), false); err != nil {
			return agent.Result{}, err
		}
	}
	key := JobKey(r.Epoch, req.Iteration, req.ItemID)
	if err := repo.PushForce(ctx, r.Remote, base, "refs/heads/"+branch, base, "refs/ralph/bases/"+key); err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: pushing %s: %w", branch, err)
	}
	watch, err := r.results.Watch(ctx, key)
	if err != nil {
		return agent.Result{}, err
	}
	defer watch.Stop()
	job := Job{Key: key, Item: req.ItemID, Role: req.Role, Iteration: req.Iteration, Attempt: req.Attempt, Branch: branch, Base: base,
		Prompt: req.Prompt, Env: req.Env, Model: req.Model, Timeout: req.Timeout, Agent: r.Spec}
	b, _ := json.Marshal(job)
	if _, err := r.JS.Publish(ctx, SubjectJobs, b, jetstream.WithMsgID(key)); err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: queueing the job: %w", err)
	}
	if req.Transcript != nil {
		fmt.Fprintf(req.Transcript, "[ralph] job %s queued for a worker (%s at %s)\n", key, branch, short(base))
	}
	var out Outcome
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
	var got string
	fetch := func() (err error) {
		got, err = repo.FetchInto(ctx, r.Remote, "refs/ralph/jobs/"+key, "refs/ralph/jobs/"+key)
		return err
	}
	if r.Listing != nil {
		err = r.Listing(fetch)
	} else {
		err = fetch()
	}
	if err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: fetching the worker's commit: %w", err)
	}
	if got != out.Commit {
		return agent.Result{}, fmt.Errorf("remote agent: refs/ralph/jobs/%s is %s, the worker reported %s", key, short(got), short(out.Commit))
	}
	if err := repo.MergeFastForward(ctx, got); err != nil {
		return agent.Result{}, fmt.Errorf("remote agent: the worker's commit %s does not continue %s: %w", short(got), branch, err)
	}
	_, _ = repo.Run(ctx, "update-ref", "-d", "refs/ralph/jobs/"+key)
	return out.Result, nil
}

func short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return strings.TrimSpace(s)
}
