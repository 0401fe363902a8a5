package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/httpauth"
	"github.com/ralph-loop/ralph/internal/mcp"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// coordinatorFlags are `ralph coordinator`'s own settings, on top of
// `ralph run`'s.
type coordinatorFlags struct {
	Remote string
	NATS   string
	Listen string
	Token  string
	Lease  time.Duration
	conn   natsFlags
	// The embedded server's certificate and key: TLS for its clients.
	ListenCert, ListenKey string
	QueueTimeout          time.Duration
	MaxPause              time.Duration
	TakeOver              bool

	names cluster.Names
	lease *cluster.Lease
	agent *cluster.RemoteAgent // the run's, once started
	// lost is set once another coordinator took the run over: this one
	// stops, and never pushes or writes the run's state again.
	lost      atomic.Bool
	cancelMu  sync.Mutex
	cancelRun context.CancelFunc // stops the engine (set by the run)

	srv     *server.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	feature string
	// userBranch: the branch pushed after each merge is the person's (the
	// task loop's base), not ralph's own: never forced.
	userBranch bool
	pushReq    chan struct{} // a merge landed: push the feature branch
	stopPush   context.CancelFunc
	pushDone   chan struct{}
	pushed     string // the tip last pushed (pushes are one at a time)
	paths      engine.Paths
	attest     *cluster.Attestations // set by runRun before the source opens
	stateMu    sync.Mutex
	stateSent  []byte // the state last put into NATS (under stateMu)
}

// natsFlags are how a client reaches a NATS server.
type natsFlags struct {
	Creds, CA, Cert, Key string
	TokenFile            string
}

// TokenEnv is the variable a NATS token may come in (instead of a flag
// or a URL, which other users of the machine can see in the process
// list).
const TokenEnv = "RALPH_NATS_TOKEN"

// token is the NATS token given by flag, by --token-file or in
// $RALPH_NATS_TOKEN ("" when none).
func (n natsFlags) token(flag string) (string, error) {
	env := os.Getenv(TokenEnv)
	// Read once: the agents and gates this process starts do not inherit
	// it.
	_ = os.Unsetenv(TokenEnv)
	if flag != "" {
		return flag, nil
	}
	if n.TokenFile != "" {
		b, err := os.ReadFile(n.TokenFile)
		if err != nil {
			return "", usage.Errorf("--token-file: %v", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", usage.Errorf("--token-file %s is empty", n.TokenFile)
	}
	return env, nil
}

// requireCredentials refuses a connection to url that would give none:
// a NATS server that takes anyone lets anyone read the jobs and answer
// them.
func (n natsFlags) requireCredentials(url, token, flag string) error {
	if token != "" || n.Creds != "" || n.Cert != "" {
		return nil
	}
	if u, err := neturl.Parse(url); err == nil && u.User != nil {
		return nil
	}
	return usage.Errorf("%s %s: no NATS credentials: give --token, --token-file, $%s, --creds or a client certificate (--tls-cert)", flag, url, TokenEnv)
}

func (n *natsFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&n.TokenFile, "token-file", "", "read the NATS token from `FILE` (a copy of the coordinator's .ralph/nats-token)")
	fl.StringVar(&n.Creds, "creds", "", "NATS credentials `FILE` (with --nats)")
	fl.StringVar(&n.CA, "tls-ca", "", "root CA `FILE` for a NATS server with TLS")
	fl.StringVar(&n.Cert, "tls-cert", "", "client certificate `FILE` for mutual TLS (with --tls-key)")
	fl.StringVar(&n.Key, "tls-key", "", "client key `FILE` for mutual TLS")
}

func (n natsFlags) options(token, name string) cluster.ConnOptions {
	return cluster.ConnOptions{Token: token, Creds: n.Creds, CA: n.CA, Cert: n.Cert, Key: n.Key, Name: name}
}

// newCmdCoordinator builds `ralph coordinator`: `ralph run` over a PRD
// whose agent iterations run on workers.
func newCmdCoordinator(f *Factory, runF func(*RunOptions) error) *cobra.Command {
	co := &coordinatorFlags{}
	var cmd *cobra.Command
	cmd = newCmdRun(f, func(o *RunOptions) error {
		o.coord = co
		if runF != nil {
			return runF(o)
		}
		if err := o.applyConfig(cmd.Context()); err != nil {
			return err
		}
		if !o.flagSet("parallel") && o.Tasks == "" {
			o.Parallel = 16
		}
		return runRun(cmd.Context(), o)
	})
	cmd.Use = "coordinator [RUN_DIR]"
	cmd.Short = "Run a PRD's or a task tree's iterations on workers on many machines (NATS JetStream)"
	cmd.Long = `Run the loop over a PRD like ` + "`ralph run --parallel N`" + `, with each agent
iteration done by a worker (` + "`ralph worker`" + `, on this or any machine) instead of
here. The coordinator owns scheduling, the merge queue and the run's state:
it pushes each iteration's starting point to the git remote (--remote), queues
a job on a NATS JetStream work queue, and fetches the commit the worker pushes
back into the story's worktree. The worker runs the story's gates on its
commit; their results stand here only for exactly that tree (the check of
the gates' files and the PRD runs here, and anything restored or changed
makes the gates run here). The gates always run here on the integrated tree
in the merge queue: a story passes only as a verified commit on the feature
branch, which is pushed to the remote after every merge.

By default the coordinator embeds a NATS server on --listen (loopback unless
told otherwise) that admits only clients with its token: --token, or one
generated on the first start, printed once and kept in .ralph/nats-token
(readable by you only). Workers give it with --token-file (a copy of that
file) or $RALPH_NATS_TOKEN. With --listen-tls-cert and --listen-tls-key the
server speaks TLS only (workers trust it with --tls-ca). With --nats it uses
an existing server or cluster instead, with credentials (--token,
--token-file, --creds or a client certificate).

No secret travels in a job: a job carries the prompt, the story and the
RALPH_* variables, never the values of .ralph/config.yaml's env: a worker's
agent takes its API keys from the worker's own environment.

A worker heartbeats while it works; a worker that dies has its job delivered
again to another after --lease. The run's state is kept on NATS too: a
coordinator started in a fresh clone with the same --nats takes the run up
where a dead one left it. A rate limit any worker meets pauses every
worker's next agent start. --parallel (default 16) is how many iterations may
be queued or running at once; the workers' slots decide how many run. Give
it about twice the workers' slots in all, so that a worker that finishes a
job finds the next one queued while the merge queue works.

With --tasks the tasks run one at a time as in ` + "`ralph run --tasks`" + `; each job
carries a copy of the task files, and the agent's edits of them (complete,
split, add) are merged back into this repository's files by task id.`
	cmd.Example = `  ralph coordinator --prd prd.json --remote git@host:team/app.git --agent claude
  ralph coordinator --tasks tasks.jsonl --gate 'make test' --remote git@host:team/app.git
  ralph coordinator --prd prd.json --remote /srv/git/app.git --listen 0.0.0.0:4222 --token s3cret
  ralph coordinator --prd prd.json --remote https://git.example/app.git --nats nats://nats.internal:4222 --creds ralph.creds`
	fl := cmd.Flags()
	if p := fl.Lookup("parallel"); p != nil {
		p.Usage = "`N` iterations queued or running at once: about twice the workers' slots in all (a task tree runs one at a time)"
		p.DefValue = "16"
	}
	fl.StringVar(&co.Remote, "remote", "", "git remote `URL` the coordinator and workers exchange branches through (required)")
	fl.StringVar(&co.NATS, "nats", "", "use the NATS server at `URL` instead of embedding one")
	fl.StringVar(&co.Listen, "listen", cluster.DefaultListen, "the embedded NATS server's `ADDR` (host:port; port 0 picks one)")
	fl.StringVar(&co.Token, "token", "", "NATS `TOKEN` workers must give (default: generated once and kept in .ralph/nats-token)")
	fl.StringVar(&co.ListenCert, "listen-tls-cert", "", "the embedded NATS server's TLS certificate `FILE` (with --listen-tls-key): workers connect over TLS")
	fl.StringVar(&co.ListenKey, "listen-tls-key", "", "the embedded NATS server's TLS key `FILE`")
	fl.DurationVar(&co.Lease, "lease", cluster.DefaultLease, "how long a silent worker keeps its job before it goes to another (`DURATION`)")
	fl.BoolVar(&co.TakeOver, "take-over", false, "take the run over from the coordinator that holds it (one whose machine died), without waiting for its lease to run out")
	fl.DurationVar(&co.QueueTimeout, "queue-timeout", cluster.DefaultQueueTimeout, "how long a job may wait for a worker (`DURATION`) before the run stops for want of one")
	fl.DurationVar(&co.MaxPause, "max-pause", cluster.DefaultMaxPause, "the longest a rate limit a worker reports pauses every worker (`DURATION`), whatever reset time it names")
	co.conn.register(cmd)
	return cmd
}

// start connects the coordinator to NATS (embedding the server unless
// --nats), sets the run up there and returns the agent that queues jobs.
func (co *coordinatorFlags) start(ctx context.Context, o *RunOptions, root string, repo *git.Repo, src engine.Source) (agent.Agent, error) {
	if co.Remote == "" {
		return nil, usage.Errorf("--remote is required: the git remote the coordinator and its workers exchange branches through")
	}
	if o.Pipeline != "" {
		return nil, usage.Errorf("ralph coordinator runs a PRD's stories or a task tree's tasks on workers: not --pipeline (its stages hand files to each other on one machine)")
	}
	var listing func(func() error) error
	var shared cluster.Shared
	switch s := src.(type) {
	case interface {
		FeatureBranch() string
		ListingWorktrees(func() error) error
	}:
		co.feature, listing = s.FeatureBranch(), s.ListingWorktrees
	case interface {
		Base() string
		cluster.Shared
	}:
		// One task at a time, as `ralph run --tasks` works them; the
		// agent's edits of the task files travel with the job.
		if _, _, _, err := s.SharedFiles(ctx); err != nil {
			return nil, err
		}
		co.feature, shared, co.userBranch = s.Base(), s, true
	default:
		return nil, usage.Errorf("ralph coordinator runs a PRD (--prd) or a task tree (--tasks) on workers")
	}
	if co.Lease < time.Second {
		return nil, usage.Errorf("--lease must be at least 1s")
	}
	if co.QueueTimeout < time.Second || co.MaxPause < time.Second {
		return nil, usage.Errorf("--queue-timeout and --max-pause must be at least 1s")
	}
	co.Remote = absRemote(co.Remote)
	if _, err := repo.Run(ctx, "ls-remote", "--heads", "--", co.Remote); err != nil {
		return nil, usage.Errorf("--remote %s: git cannot reach it: %v", co.Remote, err)
	}
	co.paths = engine.PathsFor(root)
	out := o.IO.IO.ErrOut
	url := co.NATS
	token, err := co.conn.token(co.Token)
	if err != nil {
		return nil, err
	}
	tokenFile, madeToken := "", false
	if url == "" {
		if token == "" {
			// Kept for the next start (workers reconnect with it) and
			// for the person to copy to the workers' machines.
			tokenFile = filepath.Join(co.paths.Dir, "nats-token")
			if token, madeToken, err = httpauth.LoadOrCreateToken(tokenFile); err != nil {
				return nil, fmt.Errorf("the NATS token (%s): %w", tokenFile, err)
			}
		}
		s, u, err := cluster.StartServer(co.Listen, filepath.Join(co.paths.Dir, "nats"), cluster.ServerAuth{Token: token, TLSCert: co.ListenCert, TLSKey: co.ListenKey})
		if err != nil {
			return nil, usage.Errorf("%v", err)
		}
		co.srv, url = s, u
		if co.ListenCert != "" && co.conn.CA == "" {
			co.conn.CA = co.ListenCert // its own certificate, for its own connection
		}
	} else if err := co.conn.requireCredentials(url, token, "--nats"); err != nil {
		return nil, err
	}
	nc, err := cluster.Connect(url, co.conn.options(token, "ralph coordinator"))
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	co.nc = nc
	if co.js, err = jetstream.New(nc); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	co.names = cluster.NamesFor(co.feature)
	if err := co.takeLease(sctx, ctx, root); err != nil {
		return nil, err
	}
	if err := cluster.Setup(sctx, co.js, co.names, cluster.RunConfig{Remote: co.Remote, Lease: co.Lease, MaxPause: co.MaxPause}); err != nil {
		return nil, fmt.Errorf("setting the run up on NATS at %s: %w", url, err)
	}
	if !o.Fresh {
		if err := co.recoverState(ctx, repo, src); err != nil {
			return nil, err
		}
	}
	switch {
	case madeToken:
		fmt.Fprintf(out, "ralph: NATS token (generated, shown once, kept in %s): %s\n", tokenFile, token)
		fmt.Fprintf(out, "ralph: coordinator of run %s on %s; start workers with: ralph worker --nats %s --token-file FILE (a copy of %s; or $%s)\n", co.names.Run, url, url, tokenFile, TokenEnv)
	case tokenFile != "":
		fmt.Fprintf(out, "ralph: coordinator of run %s on %s; start workers with: ralph worker --nats %s --token-file FILE (a copy of %s; or $%s)\n", co.names.Run, url, url, tokenFile, TokenEnv)
	default:
		fmt.Fprintf(out, "ralph: coordinator of run %s on %s; start workers with: ralph worker --nats %s and the same credentials\n", co.names.Run, url, url)
	}
	spec := cluster.AgentSpec{Name: o.Agent, Script: o.Script, Model: o.Model, Args: o.AgentArgs, BaseURL: o.BaseURL, Provider: o.Provider}
	if o.Agent == "cmd" && o.AgentCmd != "" {
		if spec.Command, err = proc.SplitArgs(o.AgentCmd); err != nil {
			return nil, usage.Errorf("--agent-cmd: %v", err)
		}
	}
	ra := &cluster.RemoteAgent{JS: co.js, Names: co.names, Repo: repo, Remote: co.Remote, Spec: spec, Epoch: time.Now().UnixNano(), Listing: listing, Shared: shared,
		GateTimeout: o.GateTimeout, Attest: co.attest, QueueTimeout: co.QueueTimeout, Lease: co.Lease, Log: out}
	if g, ok := src.(interface{ GatesFor(string) []gate.Gate }); ok {
		ra.GatesFor = g.GatesFor
	}
	co.agent = ra
	if err := ra.PruneRefs(ctx, repo, false); err != nil {
		fmt.Fprintf(out, "ralph: could not delete the job refs an earlier coordinator left on %s: %v\n", co.Remote, err)
	}
	go co.mirrorWorkers(ctx, co.paths.Dir, ra)
	go co.mirrorState(ctx)
	return ra, nil
}

// takeLease makes this coordinator the run's only one (a lease on NATS,
// renewed while it runs; runCtx bounds the renewal): a second one is
// refused, naming the first, unless the first's lease ran out, it is a
// dead process of this machine, or --take-over.
func (co *coordinatorFlags) takeLease(ctx, runCtx context.Context, root string) error {
	host, _ := os.Hostname()
	id, err := httpauth.NewToken()
	if err != nil {
		return err
	}
	ttl := co.Lease
	if ttl < 3*time.Second {
		ttl = 3 * time.Second
	}
	lease, before, err := cluster.Acquire(ctx, co.js, co.names.Run, cluster.Holder{ID: id, Host: host, PID: os.Getpid(), Dir: root}, ttl, co.TakeOver)
	if errors.Is(err, cluster.ErrLeaseHeld) {
		return usage.Errorf("run %s: %v: stop that coordinator, wait for its lease to run out, or give --take-over", co.names.Run, err)
	}
	if err != nil {
		return fmt.Errorf("taking run %s's lease on NATS: %w", co.names.Run, err)
	}
	if before != nil {
		fmt.Fprintf(os.Stderr, "ralph: took run %s over from the coordinator %s\n", co.names.Run, before)
	}
	co.lease = lease
	go lease.Keep(runCtx)
	go func() {
		select {
		case <-runCtx.Done():
		case <-lease.Lost():
			co.lost.Store(true)
			h, _ := lease.Holder(context.WithoutCancel(runCtx))
			fmt.Fprintf(os.Stderr, "ralph: another coordinator (%s) took run %s over: this one stops and leaves the run to it\n", h, co.names.Run)
			co.cancelMu.Lock()
			if co.cancelRun != nil {
				co.cancelRun()
			}
			co.cancelMu.Unlock()
		}
	}()
	return nil
}

// runContext is the run's context, ended when the lease is lost.
func (co *coordinatorFlags) runContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	co.cancelMu.Lock()
	co.cancelRun = cancel
	co.cancelMu.Unlock()
	if co.lost.Load() {
		cancel()
	}
	return ctx, cancel
}

// absRemote makes a remote that is a local path absolute (from the
// current folder, as the person typed it): git runs in the stories'
// worktrees, and workers read it from the run's settings.
func absRemote(remote string) string {
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

// observe pushes the feature branch after every merge, so a person (and
// the next iteration's worker) sees the run's progress on the remote. The
// push runs beside the run, one at a time (two pushes of one ref race on
// the remote's lock); merges that land while one runs are pushed together
// by the next.
func (co *coordinatorFlags) observe(ctx context.Context, repo *git.Repo, cfg *engine.Config) {
	co.pushReq = make(chan struct{}, 1)
	pctx, cancel := context.WithCancel(ctx)
	co.pushDone = make(chan struct{})
	co.stopPush = cancel
	go func() {
		defer close(co.pushDone)
		for {
			select {
			case <-pctx.Done():
				return
			case <-co.pushReq:
				co.pushFeature(ctx, repo)
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
			case co.pushReq <- struct{}{}:
			default: // one is due already
			}
		}
	}
}

// pushFeature pushes the feature branch's tip — after putting the run's
// state into NATS: the engine records a merge before it makes it, so the
// state read after reading the tip knows every commit the push brings. A
// coordinator that takes the run up from NATS then finds no merge on the
// remote the state does not expect.
func (co *coordinatorFlags) pushFeature(ctx context.Context, repo *git.Repo) {
	if co.lost.Load() {
		return // the run is another coordinator's now
	}
	ctx = context.WithoutCancel(ctx)
	ref := "refs/heads/" + co.feature
	tip, err := repo.RevParse(ctx, ref)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ralph: pushing %s to %s: %v\n", co.feature, co.Remote, err)
		return
	}
	co.putState(ctx)
	if tip == co.pushed {
		return // the last push's (the one at the stop, after the last merge)
	}
	push := repo.PushForce
	if co.userBranch {
		push = repo.Push
	}
	if err := push(ctx, co.Remote, tip, ref); err != nil {
		fmt.Fprintf(os.Stderr, "ralph: pushing %s to %s: %v\n", co.feature, co.Remote, err)
		return
	}
	co.pushed = tip
}

// stop pushes the feature branch a last time and closes NATS.
func (co *coordinatorFlags) stop(ctx context.Context, repo *git.Repo) {
	if co.stopPush != nil {
		co.stopPush()
		<-co.pushDone // the push under way ends first
	}
	if co.feature != "" && co.nc != nil {
		co.pushFeature(ctx, repo)
	}
	if co.agent != nil && !co.lost.Load() {
		_ = co.agent.PruneRefs(context.WithoutCancel(ctx), repo, true)
	}
	if co.lease != nil {
		co.lease.Release(context.WithoutCancel(ctx))
	}
	if co.nc != nil {
		co.nc.Close()
	}
	if co.srv != nil {
		co.srv.Shutdown()
		co.srv.WaitForShutdown()
	}
}

// The run's state lives on NATS too (key "state" of the ralph_run
// bucket), beside the feature branch on the remote: a coordinator started
// on another machine — a fresh clone, the same --nats — takes the run up
// where the dead one left it.

// mirrorState puts the run's state into NATS every second while it
// changes, and once more when the coordinator stops.
func (co *coordinatorFlags) mirrorState(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		co.putState(ctx)
	}
}

func (co *coordinatorFlags) putState(ctx context.Context) {
	co.stateMu.Lock()
	defer co.stateMu.Unlock()
	if co.lost.Load() {
		return
	}
	st, _, err := engine.LoadOrRebuildState(co.paths)
	if err != nil || st == nil {
		return
	}
	b, err := json.Marshal(st)
	if err != nil || bytes.Equal(b, co.stateSent) {
		return
	}
	kv, err := co.js.KeyValue(ctx, co.names.Settings)
	if err != nil {
		return
	}
	if _, err := kv.Put(ctx, cluster.KeyState, b); err == nil {
		co.stateSent = b
	}
}

// recoverState starts from the state on NATS when this repository has
// none: the run a coordinator elsewhere was running, with the feature
// branch it pushed.
func (co *coordinatorFlags) recoverState(ctx context.Context, repo *git.Repo, src engine.Source) error {
	p := co.paths
	if st, _, err := engine.LoadOrRebuildState(p); err != nil || st != nil {
		return nil // this repository's own state (or its error) rules
	}
	kv, err := co.js.KeyValue(ctx, co.names.Settings)
	if err != nil {
		return nil
	}
	// The branch first, then the state: a coordinator puts the state
	// before it pushes a merge, so every merge the fetched branch holds is
	// in the state read after it.
	fetched := false
	if co.feature != "" && !repo.BranchExists(ctx, co.feature) {
		ref := "refs/heads/" + co.feature
		fetched = repo.FetchRefs(ctx, co.Remote, ref, ref) == nil
	}
	e, err := kv.Get(ctx, cluster.KeyState)
	if err != nil {
		return nil
	}
	st := &engine.State{}
	info := src.Info()
	if err := json.Unmarshal(e.Value(), st); err != nil || st.RunID == "" {
		return fmt.Errorf("the run state on NATS (%s/%s) is not a run's state: %v", co.names.Settings, cluster.KeyState, err)
	}
	if st.Source != info.Kind || filepath.Base(st.SourcePath) != filepath.Base(info.Path) {
		fmt.Fprintf(os.Stderr, "ralph: the run on NATS is of %s %s, not this one: starting a new run\n", st.Source, st.SourcePath)
		return nil
	}
	if co.feature != "" && !fetched && !repo.BranchExists(ctx, co.feature) {
		// Nothing it merged reached the remote: nothing to take up.
		fmt.Fprintf(os.Stderr, "ralph: run %s on NATS never pushed %s to %s: starting it anew here\n", st.RunID, co.feature, co.Remote)
		return nil
	}
	// The tree as the dead coordinator left it: on the branch it merges
	// into (the run writes the PRD's progress there).
	if cur, _ := repo.CurrentBranch(ctx); co.feature != "" && cur != co.feature {
		if err := repo.Checkout(ctx, co.feature); err != nil {
			return fmt.Errorf("checking out %s to resume run %s: %w", co.feature, st.RunID, err)
		}
	}
	st.SourcePath = info.Path
	co.reconcile(ctx, repo, st)
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
	fmt.Fprintf(os.Stderr, "ralph: this repository has no run state: resuming run %s from NATS (%d/%d passed), %s from %s\n", st.RunID, passed, total, co.feature, co.Remote)
	return nil
}

// reconcile makes the state taken from NATS agree with this clone: the
// dead coordinator's iterations under way had their work in its own trees
// (a worker's fetched commit, a story waiting in the merge queue), which
// this clone does not have: they run again, no attempt spent. A story
// passed whose commit is not on the feature branch the remote holds (the
// coordinator died between recording the merge and pushing it) is not
// passed: it runs again too. What is left believed is on the branch.
func (co *coordinatorFlags) reconcile(ctx context.Context, repo *git.Repo, st *engine.State) {
	for _, c := range st.Current {
		if is := st.Items[c.Item]; is != nil && is.Status == engine.ItemRunning {
			is.Status = engine.ItemPending
		}
		st.Refunds++
		fmt.Fprintf(os.Stderr, "ralph: %s was under way on the coordinator that stopped (iteration %d, %s); its work is not in this clone: it runs again (no attempt spent)\n", c.Item, c.Iteration, c.Phase)
	}
	st.Current = nil
	if co.feature == "" || co.userBranch {
		return // a task tree's record is its own files
	}
	for _, id := range st.Order {
		is := st.Items[id]
		if is == nil || is.Status != engine.ItemPassed {
			continue
		}
		if is.Commit != "" && repo.IsAncestor(ctx, is.Commit, "refs/heads/"+co.feature) {
			continue
		}
		fmt.Fprintf(os.Stderr, "ralph: %s is passed in the run's state, but its commit %s is not on %s at %s: it runs again\n", id, engine.ShortSHA(is.Commit), co.feature, co.Remote)
		is.Status, is.Commit, is.PassedAt, is.Reason = engine.ItemPending, "", nil, ""
	}
}

// mirrorWorkers writes the live workers to .ralph/workers.json, and the
// jobs queued or running to .ralph/jobs.json, every second while the run
// lasts.
func (co *coordinatorFlags) mirrorWorkers(ctx context.Context, dir string, ra *cluster.RemoteAgent) {
	defer cluster.RemoveWorkersFile(dir)
	for {
		if ws, err := cluster.Workers(ctx, co.js, co.names); err == nil {
			_ = cluster.WriteWorkersFile(dir, ws)
		}
		_ = cluster.WriteJobsFile(dir, ra.Jobs())
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// workerMarkEnv marks every process a worker's jobs start.
const workerMarkEnv = "RALPH_WORKER_MARK"

// startWorkerGuard starts `ralph worker guard`: it waits for this process
// to end, then kills every process that carries mark.
func startWorkerGuard(mark string) error {
	self, err := mcp.Executable()
	if err != nil {
		return err
	}
	c := exec.Command(self, "worker", "guard", strconv.Itoa(os.Getpid()), mark)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		return err
	}
	go func() { _ = c.Wait() }()
	return nil
}

// newCmdWorkerGuard builds the hidden `ralph worker guard PID MARK`.
func newCmdWorkerGuard() *cobra.Command {
	return &cobra.Command{
		Use:    "guard PID MARK",
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := strconv.Atoi(args[0])
			if err != nil {
				return err
			}
			for os.Getppid() == pid {
				time.Sleep(200 * time.Millisecond)
			}
			proc.KillTagged(args[1], true)
			return nil
		},
	}
}

// WorkerOptions are `ralph worker`'s settings.
type WorkerOptions struct {
	IO       *Factory
	NATS     string
	Run      string
	Dir      string
	Parallel int
	Token    string
	conn     natsFlags
	AgentFlags
	RateLimitBackoff time.Duration
	flagSet          func(string) bool
	NoSandbox        bool
}

// newCmdWorker builds `ralph worker`.
func newCmdWorker(f *Factory, runF func(*WorkerOptions) error) *cobra.Command {
	opts := &WorkerOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run agent iterations for a coordinator (ralph coordinator) on this machine",
		Long: `Connect to a coordinator's NATS server (--nats, as the coordinator printed it)
and run its jobs, --parallel at a time: for each, fetch the story's starting
point from the run's git remote into a tree of its own under --dir, run the
agent there (the coordinator's, unless --agent is given here), commit what it
did, push it, and report the agent's result. The coordinator verifies and
merges; a worker never commits to the feature branch.

A worker started before its coordinator waits for it. While it works it
renews its lease on the job; killed, its job goes to another worker when the
lease runs out (the coordinator's --lease). Stop it with Ctrl-C: the jobs it
had go back to the queue.`,
		Example: `  ralph worker --nats nats://127.0.0.1:4222
  ralph worker --nats nats://TOKEN@coordinator.lan:4222 --parallel 4 --dir /var/tmp/ralph
  ralph worker --nats nats://127.0.0.1:4222 --agent codex --model gpt-5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.flagSet = cmd.Flags().Changed
			if runF != nil {
				return runF(opts)
			}
			return runWorker(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.NATS, "nats", "", "the coordinator's NATS `URL` (required)")
	fl.StringVar(&opts.Run, "run", "", "the run to work for (`NAME`, as the coordinator prints it): needed only when several coordinators share the NATS server")
	fl.StringVar(&opts.Dir, "dir", "ralph-worker", "`DIR` for the worker's clone of the remote and its trees")
	fl.IntVar(&opts.Parallel, "parallel", 1, "jobs run at once (`N` slots)")
	fl.StringVar(&opts.Token, "token", "", "NATS `TOKEN` (better: --token-file or $"+TokenEnv+", which the process list does not show)")
	fl.DurationVar(&opts.RateLimitBackoff, "rate-limit-backoff", time.Minute, "pause every worker this long (`DURATION`) when an agent hits a limit without saying when it resets")
	fl.BoolVar(&opts.NoSandbox, "no-sandbox", false, "run the jobs' agents and gates without the sandbox (bubblewrap)")
	opts.conn.register(cmd)
	opts.AgentFlags.register(fl)
	cmd.AddCommand(newCmdWorkerGuard())
	return cmd
}

func runWorker(ctx context.Context, o *WorkerOptions) error {
	if o.NATS == "" {
		return usage.Errorf("--nats is required: the URL the coordinator printed")
	}
	if o.Parallel < 1 {
		return usage.Errorf("--parallel must be at least 1")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	// Two workers in one folder would check their jobs out into the same
	// trees.
	lock, err := store.TryLock(filepath.Join(dir, "worker.lock"))
	if err != nil {
		var held *store.ErrLocked
		if errors.As(err, &held) {
			return usage.Errorf("--dir %s is in use by another worker, %s: give each worker its own --dir", dir, held.Holder)
		}
		return err
	}
	defer lock.Unlock()
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s-%d", host, os.Getpid())
	w := &cluster.Worker{RunName: o.Run, Dir: dir, Slots: o.Parallel, ID: cluster.SafeID(id), Host: host, Log: o.IO.IO.ErrOut, RateLimitBackoff: o.RateLimitBackoff}
	if err := o.confine(w, dir); err != nil {
		return err
	}
	if o.flagSet("agent") {
		if w.Override, err = o.AgentFlags.build(); err != nil {
			return err
		}
		w.OverrideName = o.Agent
	}
	token, err := o.conn.token(o.Token)
	if err != nil {
		return err
	}
	if err := o.conn.requireCredentials(o.NATS, token, "--nats"); err != nil {
		return err
	}
	nc, err := cluster.Connect(o.NATS, o.conn.options(token, "ralph worker "+id))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", o.NATS, err)
	}
	defer nc.Close()
	w.NC = nc
	proc.BecomeSubreaper()
	// The agents run in process groups of their own: a worker killed
	// with -9 would leave them running (and spending). A guard process,
	// in a session of its own, outlives the worker and kills everything
	// the worker's jobs started once the worker is gone.
	w.Mark = workerMarkEnv + "=" + id
	if err := startWorkerGuard(w.Mark); err != nil {
		fmt.Fprintf(o.IO.IO.ErrOut, "ralph worker: no guard for the agents (they would outlive a killed worker): %v\n", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = w.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
