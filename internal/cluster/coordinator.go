package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/httpauth"
	"github.com/ralph-loop/ralph/internal/judge"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// CoordinatorConfig is a coordinator's settings (`ralph coordinator`'s
// flags).
type CoordinatorConfig struct {
	Remote string // the git remote (a local path made absolute here)
	// NATS is a server's URL; "" embeds one on Listen, behind the token
	// (Conn.Token, else one kept in .ralph/nats-token) or, once the
	// repository has worker keys, behind the keys.
	NATS   string
	Listen string
	Conn   ConnOptions
	// TokenFrom names where Conn.Token came from ("--token", …), for a
	// token given to a server that admits by key.
	TokenFrom             string
	ListenCert, ListenKey string
	Lease                 time.Duration
	QueueTimeout          time.Duration
	MaxPause              time.Duration
	TakeOver              bool
	Fresh                 bool
	// JudgeHere: every story's gates run on the coordinator; the workers
	// run agents only, and no report of theirs stands for a gate.
	JudgeHere   bool
	Spec        AgentSpec
	GateTimeout time.Duration
	Out         io.Writer // what the person should see
}

// Coordinator is `ralph coordinator`'s lifecycle around the engine's run:
// NATS (embedded or not), the run's lease, its stream and buckets, the
// remote agent, the feature branch pushed after each landing, the run's
// state and workers mirrored, the worker keys watched.
type Coordinator struct {
	cfg    CoordinatorConfig
	names  Names
	lease  *Lease
	agent  *RemoteAgent // the run's, once started
	attest *Attestations
	keys   *Keyring // with worker keys
	// lost is set once another coordinator took the run over: this one
	// stops, and never pushes or writes the run's state again.
	lost      atomic.Bool
	cancelMu  sync.Mutex
	cancelRun context.CancelFunc // stops the engine (set by the run)

	srv     *Server
	nc      *nats.Conn
	js      jetstream.JetStream
	feature string
	// userBranch: the branch pushed after each landing is the person's
	// (the task loop's base), not ralph's own: never forced.
	userBranch bool
	pushReq    chan struct{} // a story landed: push the feature branch
	stopPush   context.CancelFunc
	pushDone   chan struct{}
	pushed     string // the tip last pushed (pushes are one at a time)
	paths      engine.Paths
	stateMu    sync.Mutex
	stateSent  []byte // the state last put into NATS (under stateMu)
}

// NewCoordinator is a coordinator with cfg, not started.
func NewCoordinator(cfg CoordinatorConfig) *Coordinator {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	c := &Coordinator{cfg: cfg}
	if !cfg.JudgeHere {
		c.attest = &Attestations{}
	}
	return c
}

// Attester is what the run's judge asks for the workers' gate results
// (nil with JudgeHere: every gate runs here).
func (c *Coordinator) Attester() judge.Attester {
	if c.attest == nil {
		return nil
	}
	return c.attest
}

// JudgedHere names the coordinator on the commits whose gates it ran.
func JudgedHere() string {
	host, _ := os.Hostname()
	return "coordinator on " + host
}

// Start connects the coordinator to NATS (embedding the server unless
// NATS is set), takes the run's lease, sets the run up there, takes up a
// run another coordinator left on NATS, and returns the agent that queues
// the iterations as jobs.
func (c *Coordinator) Start(ctx context.Context, root string, repo *git.Repo, src engine.Source) (agent.Agent, error) {
	var listing func(func() error) error
	var shared Shared
	switch s := src.(type) {
	case interface {
		FeatureBranch() string
		ListingWorktrees(func() error) error
	}:
		c.feature, listing = s.FeatureBranch(), s.ListingWorktrees
	case interface {
		Base() string
		Shared
	}:
		// One task at a time, as `ralph run --tasks` works them; the
		// agent's edits of the task files travel with the job.
		if _, _, _, err := s.SharedFiles(ctx); err != nil {
			return nil, err
		}
		c.feature, shared, c.userBranch = s.Base(), s, true
	default:
		return nil, usage.Errorf("ralph coordinator runs a PRD (--prd) or a task tree (--tasks) on workers")
	}
	c.cfg.Remote = AbsRemote(c.cfg.Remote)
	if _, err := repo.Run(ctx, "ls-remote", "--heads", "--", c.cfg.Remote); err != nil {
		return nil, usage.Errorf("--remote %s: git cannot reach it: %v", c.cfg.Remote, err)
	}
	c.paths = engine.PathsFor(root)
	keys, err := OpenKeyring(filepath.Join(c.paths.Dir, KeysFile))
	if err != nil {
		return nil, usage.Errorf("the worker keys: %v", err)
	}
	if keys.Any() {
		c.keys = keys
	}
	url, hint, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c.names = NamesFor(c.feature)
	if err := c.takeLease(sctx, ctx, root); err != nil {
		return nil, err
	}
	if err := Setup(sctx, c.js, c.names, RunConfig{Remote: c.cfg.Remote, Lease: c.cfg.Lease, MaxPause: c.cfg.MaxPause, Signed: c.keys != nil}); err != nil {
		return nil, fmt.Errorf("setting the run up on NATS at %s: %w", url, err)
	}
	if !c.cfg.Fresh {
		if err := c.recoverState(ctx, repo, src); err != nil {
			return nil, err
		}
	}
	out := c.cfg.Out
	fmt.Fprintf(out, "ralph: coordinator of run %s on %s; start workers with: ralph worker --nats %s %s\n", c.names.Run, url, url, hint)
	switch {
	case c.cfg.JudgeHere:
		fmt.Fprintf(out, "ralph: --judge-on-coordinator: every story's gates run here; the workers run agents only\n")
	case c.keys != nil:
		fmt.Fprintf(out, "ralph: workers run each story's gates; their results stand only for exactly the tree judged here, signed with the worker's key; each landed commit names who judged it (Ralph-Judged-By)\n")
	default:
		fmt.Fprintf(out, "ralph: workers run each story's gates; their results stand only for exactly the tree judged here, and every holder of the token is trusted as a worker (worker keys: `ralph cluster key add NAME`)\n")
	}
	ra := &RemoteAgent{JS: c.js, Names: c.names, Repo: repo, Remote: c.cfg.Remote, Spec: c.cfg.Spec, Epoch: time.Now().UnixNano(), Listing: listing, Shared: shared,
		GateTimeout: c.cfg.GateTimeout, Attest: c.attest, Keys: c.keys, QueueTimeout: c.cfg.QueueTimeout, Lease: c.cfg.Lease, Log: out}
	if g, ok := src.(interface{ GatesFor(string) []gate.Gate }); ok && c.attest != nil {
		ra.GatesFor = g.GatesFor
	}
	c.agent = ra
	if err := ra.PruneRefs(ctx, repo, false); err != nil {
		fmt.Fprintf(out, "ralph: could not delete the job refs an earlier coordinator left on %s: %v\n", c.cfg.Remote, err)
	}
	go c.mirrorWorkers(ctx, c.paths.Dir, ra)
	go c.mirrorState(ctx)
	if c.keys != nil {
		go c.watchKeys(ctx)
	}
	return ra, nil
}

// connect embeds the NATS server (unless cfg.NATS) and connects to it.
// It returns the URL workers use and what they give besides.
func (c *Coordinator) connect(ctx context.Context) (url, hint string, err error) {
	url, conn := c.cfg.NATS, c.cfg.Conn
	conn.Name = "ralph coordinator"
	switch {
	case url != "":
		hint = "and the same NATS credentials"
		if c.keys != nil {
			hint += ", and --key FILE: each worker's own key (`ralph cluster key add NAME` here)"
		}
	case c.keys != nil:
		if conn.Token != "" {
			return "", "", usage.Errorf("%s: this repository has worker keys (%s): its NATS server admits each worker by its own key, never by a shared token; drop the token", c.cfg.TokenFrom, filepath.Join(c.paths.Dir, KeysFile))
		}
		self, err := NewKey("coordinator")
		if err != nil {
			return "", "", err
		}
		if c.srv, url, err = StartServer(c.cfg.Listen, filepath.Join(c.paths.Dir, "nats"), ServerAuth{Self: self, Keys: c.keys.Active(), TLSCert: c.cfg.ListenCert, TLSKey: c.cfg.ListenKey}); err != nil {
			return "", "", usage.Errorf("%v", err)
		}
		conn.Own = self
		hint = "--key FILE (each worker's own key: `ralph cluster key add NAME` here)"
	default:
		tokenFile := ""
		if conn.Token == "" {
			// Kept for the next start (workers reconnect with it) and
			// for the person to copy to the workers' machines.
			tokenFile = filepath.Join(c.paths.Dir, "nats-token")
			var made bool
			if conn.Token, made, err = httpauth.LoadOrCreateToken(tokenFile); err != nil {
				return "", "", fmt.Errorf("the NATS token (%s): %w", tokenFile, err)
			}
			if made {
				fmt.Fprintf(c.cfg.Out, "ralph: NATS token (generated, shown once, kept in %s): %s\n", tokenFile, conn.Token)
			}
		}
		if c.srv, url, err = StartServer(c.cfg.Listen, filepath.Join(c.paths.Dir, "nats"), ServerAuth{Token: conn.Token, TLSCert: c.cfg.ListenCert, TLSKey: c.cfg.ListenKey}); err != nil {
			return "", "", usage.Errorf("%v", err)
		}
		hint = "and the same credentials"
		if tokenFile != "" {
			hint = fmt.Sprintf("--token-file FILE (a copy of %s; or $RALPH_NATS_TOKEN)", tokenFile)
		}
	}
	if c.srv != nil && c.cfg.ListenCert != "" && conn.CA == "" {
		conn.CA = c.cfg.ListenCert // its own certificate, for its own connection
	}
	if c.nc, err = Connect(url, conn); err != nil {
		return "", "", fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	if c.js, err = jetstream.New(c.nc); err != nil {
		return "", "", err
	}
	return url, hint, nil
}

// watchKeys reads the worker keys again when they change: a key revoked
// (`ralph cluster key revoke`) is refused at once — its worker's
// connections to the embedded server are closed, its reports refused,
// its job queued again (RemoteAgent) — and a key added is admitted.
func (c *Coordinator) watchKeys(ctx context.Context) {
	before := c.keys.Active()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
		changed, err := c.keys.Refresh()
		if err != nil {
			fmt.Fprintf(c.cfg.Out, "ralph: reading the worker keys: %v (the keys stay as they were)\n", err)
			continue
		}
		if !changed {
			continue
		}
		now := c.keys.Active()
		if c.srv != nil {
			if err := c.srv.Admit(now); err != nil {
				fmt.Fprintf(c.cfg.Out, "ralph: %v\n", err)
			}
		}
		for _, k := range before {
			if !containsKey(now, k.Name) {
				fmt.Fprintf(c.cfg.Out, "ralph: worker key %s revoked: the worker is refused (its connections closed, its reports not counted, its job queued again)\n", k.Name)
			}
		}
		for _, k := range now {
			if !containsKey(before, k.Name) {
				fmt.Fprintf(c.cfg.Out, "ralph: worker key %s added: the worker may connect\n", k.Name)
			}
		}
		before = now
	}
}

func containsKey(keys []WorkerKey, name string) bool {
	for _, k := range keys {
		if k.Name == name {
			return true
		}
	}
	return false
}

// takeLease makes this coordinator the run's only one (a lease on NATS,
// renewed while it runs; runCtx bounds the renewal): a second one is
// refused, naming the first, unless the first's lease ran out, it is a
// dead process of this machine, or TakeOver.
func (c *Coordinator) takeLease(ctx, runCtx context.Context, root string) error {
	host, _ := os.Hostname()
	id, err := httpauth.NewToken()
	if err != nil {
		return err
	}
	ttl := c.cfg.Lease
	if ttl < 3*time.Second {
		ttl = 3 * time.Second
	}
	lease, before, err := Acquire(ctx, c.js, c.names.Run, Holder{ID: id, Host: host, PID: os.Getpid(), Dir: root}, ttl, c.cfg.TakeOver)
	if errors.Is(err, ErrLeaseHeld) {
		return usage.Errorf("run %s: %v: stop that coordinator, wait for its lease to run out, or give --take-over", c.names.Run, err)
	}
	if err != nil {
		return fmt.Errorf("taking run %s's lease on NATS: %w", c.names.Run, err)
	}
	if before != nil {
		fmt.Fprintf(c.cfg.Out, "ralph: took run %s over from the coordinator %s\n", c.names.Run, before)
	}
	c.lease = lease
	go lease.Keep(runCtx)
	go func() {
		select {
		case <-runCtx.Done():
		case <-lease.Lost():
			c.lost.Store(true)
			h, _ := lease.Holder(context.WithoutCancel(runCtx))
			fmt.Fprintf(c.cfg.Out, "ralph: another coordinator (%s) took run %s over: this one stops and leaves the run to it\n", h, c.names.Run)
			c.cancelMu.Lock()
			if c.cancelRun != nil {
				c.cancelRun()
			}
			c.cancelMu.Unlock()
		}
	}()
	return nil
}

// RunContext is the run's context, ended when the lease is lost.
func (c *Coordinator) RunContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	c.cancelMu.Lock()
	c.cancelRun = cancel
	c.cancelMu.Unlock()
	if c.lost.Load() {
		cancel()
	}
	return ctx, cancel
}

// AbsRemote makes a remote that is a local path absolute (from the
// current folder, as the person typed it): git runs in the stories'
// worktrees, and workers read it from the run's settings.
func AbsRemote(remote string) string {
	if strings.Contains(remote, "://") {
		return remote
	}
	if i := strings.IndexByte(remote, ':'); i > 0 && !strings.ContainsRune(remote[:i], '/') {
		return remote // [user@]host:path
	}
	if abs, err := filepath.Abs(remote); err == nil {
		return abs
	}
	return remote
}

// Observe pushes the feature branch after every landing, so a person
// (and the next iteration's worker) sees the run's progress on the
// remote. The push runs beside the run, one at a time (two pushes of one
// ref race on the remote's lock); landings while one runs are pushed
// together by the next.
func (c *Coordinator) Observe(ctx context.Context, repo *git.Repo, cfg *engine.Config) {
	c.pushReq = make(chan struct{}, 1)
	pctx, cancel := context.WithCancel(ctx)
	c.pushDone = make(chan struct{})
	c.stopPush = cancel
	go func() {
		defer close(c.pushDone)
		for {
			select {
			case <-pctx.Done():
				return
			case <-c.pushReq:
				c.pushFeature(ctx, repo)
			}
		}
	}()
	next := cfg.OnEvent
	cfg.OnEvent = func(ev engine.Event) {
		if next != nil {
			next(ev)
		}
		if ev.Type == "item_passed" {
			select {
			case c.pushReq <- struct{}{}:
			default: // one is due already
			}
		}
	}
}

// pushFeature pushes the feature branch's tip — after putting the run's
// state into NATS: the engine records a landing before it makes it, so
// the state read after reading the tip knows every commit the push
// brings. A coordinator that takes the run up from NATS then finds no
// landing on the remote the state does not expect.
func (c *Coordinator) pushFeature(ctx context.Context, repo *git.Repo) {
	if c.lost.Load() {
		return // the run is another coordinator's now
	}
	ctx = context.WithoutCancel(ctx)
	ref := "refs/heads/" + c.feature
	tip, err := repo.RevParse(ctx, ref)
	if err != nil {
		fmt.Fprintf(c.cfg.Out, "ralph: pushing %s to %s: %v\n", c.feature, c.cfg.Remote, err)
		return
	}
	c.putState(ctx)
	if tip == c.pushed {
		return // the last push's (the one at the stop, after the last landing)
	}
	push := repo.PushForce
	if c.userBranch {
		push = repo.Push
	}
	if err := push(ctx, c.cfg.Remote, tip, ref); err != nil {
		fmt.Fprintf(c.cfg.Out, "ralph: pushing %s to %s: %v\n", c.feature, c.cfg.Remote, err)
		return
	}
	c.pushed = tip
}

// Stop pushes the feature branch a last time and closes NATS.
func (c *Coordinator) Stop(ctx context.Context, repo *git.Repo) {
	if c.stopPush != nil {
		c.stopPush()
		<-c.pushDone // the push under way ends first
	}
	if c.feature != "" && c.nc != nil {
		c.pushFeature(ctx, repo)
	}
	if c.agent != nil && !c.lost.Load() {
		_ = c.agent.PruneRefs(context.WithoutCancel(ctx), repo, true)
	}
	if c.lease != nil {
		c.lease.Release(context.WithoutCancel(ctx))
	}
	if c.nc != nil {
		c.nc.Close()
	}
	if c.srv != nil {
		c.srv.Shutdown()
		c.srv.WaitForShutdown()
	}
}

// The run's state lives on NATS too (key "state" of the run's settings
// bucket), beside the feature branch on the remote: a coordinator started
// on another machine — a fresh clone, the same --nats — takes the run up
// where the dead one left it.

// mirrorState puts the run's state into NATS every second while it
// changes, and once more when the coordinator stops.
func (c *Coordinator) mirrorState(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		c.putState(ctx)
	}
}

func (c *Coordinator) putState(ctx context.Context) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.lost.Load() {
		return
	}
	st, _, err := engine.LoadOrRebuildState(c.paths)
	if err != nil || st == nil {
		return
	}
	b, err := json.Marshal(st)
	if err != nil || bytes.Equal(b, c.stateSent) {
		return
	}
	kv, err := c.js.KeyValue(ctx, c.names.Settings)
	if err != nil {
		return
	}
	if _, err := kv.Put(ctx, KeyState, b); err == nil {
		c.stateSent = b
	}
}

// recoverState starts from the state on NATS when this repository has
// none: the run a coordinator elsewhere was running, with the feature
// branch it pushed.
func (c *Coordinator) recoverState(ctx context.Context, repo *git.Repo, src engine.Source) error {
	p, out := c.paths, c.cfg.Out
	if st, _, err := engine.LoadOrRebuildState(p); err != nil || st != nil {
		return nil // this repository's own state (or its error) rules
	}
	kv, err := c.js.KeyValue(ctx, c.names.Settings)
	if err != nil {
		return nil
	}
	// The branch first, then the state: a coordinator puts the state
	// before it pushes a landing, so every landing the fetched branch
	// holds is in the state read after it.
	fetched := false
	if c.feature != "" && !repo.BranchExists(ctx, c.feature) {
		ref := "refs/heads/" + c.feature
		fetched = repo.FetchRefs(ctx, c.cfg.Remote, ref, ref) == nil
	}
	e, err := kv.Get(ctx, KeyState)
	if err != nil {
		return nil
	}
	st := &engine.State{}
	info := src.Info()
	if err := json.Unmarshal(e.Value(), st); err != nil || st.RunID == "" {
		return fmt.Errorf("the run state on NATS (%s/%s) is not a run's state: %v", c.names.Settings, KeyState, err)
	}
	if st.Source != info.Kind || filepath.Base(st.SourcePath) != filepath.Base(info.Path) {
		fmt.Fprintf(out, "ralph: the run on NATS is of %s %s, not this one: starting a new run\n", st.Source, st.SourcePath)
		return nil
	}
	if c.feature != "" && !fetched && !repo.BranchExists(ctx, c.feature) {
		// Nothing it landed reached the remote: nothing to take up.
		fmt.Fprintf(out, "ralph: run %s on NATS never pushed %s to %s: starting it anew here\n", st.RunID, c.feature, c.cfg.Remote)
		return nil
	}
	// The tree as the dead coordinator left it: on the branch it lands on
	// (the run writes the PRD's progress there).
	if cur, _ := repo.CurrentBranch(ctx); c.feature != "" && cur != c.feature {
		if err := repo.Checkout(ctx, c.feature); err != nil {
			return fmt.Errorf("checking out %s to resume run %s: %w", c.feature, st.RunID, err)
		}
	}
	st.SourcePath = info.Path
	c.reconcile(ctx, repo, st)
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	if err := store.WriteFile(p.State, b, 0o644); err != nil {
		return err
	}
	passed, _, total := st.Counts()
	fmt.Fprintf(out, "ralph: this repository has no run state: resuming run %s from NATS (%d/%d passed), %s from %s\n", st.RunID, passed, total, c.feature, c.cfg.Remote)
	return nil
}

// reconcile makes the state taken from NATS agree with this clone: the
// dead coordinator's iterations under way had their work in its own trees
// (a worker's fetched commit, a story waiting to land), which this clone
// does not have: they run again, no attempt spent. A story passed whose
// commit is not on the feature branch the remote holds (the coordinator
// died between recording the landing and pushing it) is not passed: it
// runs again too. What is left believed is on the branch.
func (c *Coordinator) reconcile(ctx context.Context, repo *git.Repo, st *engine.State) {
	out := c.cfg.Out
	for _, cur := range st.Current {
		if is := st.Items[cur.Item]; is != nil && is.Status == engine.ItemRunning {
			is.Status = engine.ItemPending
		}
		st.Refunds++
		fmt.Fprintf(out, "ralph: %s was under way on the coordinator that stopped (iteration %d, %s); its work is not in this clone: it runs again (no attempt spent)\n", cur.Item, cur.Iteration, cur.Phase)
	}
	st.Current = nil
	if c.feature == "" || c.userBranch {
		return // a task tree's record is its own files
	}
	for _, id := range st.Order {
		is := st.Items[id]
		if is == nil || is.Status != engine.ItemPassed {
			continue
		}
		if is.Commit != "" && repo.IsAncestor(ctx, is.Commit, "refs/heads/"+c.feature) {
			continue
		}
		fmt.Fprintf(out, "ralph: %s is passed in the run's state, but its commit %s is not on %s at %s: it runs again\n", id, engine.ShortSHA(is.Commit), c.feature, c.cfg.Remote)
		is.Status, is.Commit, is.PassedAt, is.Reason = engine.ItemPending, "", nil, ""
	}
}

// mirrorWorkers writes the live workers to .ralph/workers.json, and the
// jobs queued or running to .ralph/jobs.json, every second while the run
// lasts.
func (c *Coordinator) mirrorWorkers(ctx context.Context, dir string, ra *RemoteAgent) {
	defer RemoveWorkersFile(dir)
	for {
		if ws, err := Workers(ctx, c.js, c.names); err == nil {
			_ = WriteWorkersFile(dir, ws)
		}
		_ = WriteJobsFile(dir, ra.Jobs())
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
