package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/git"
	"github.com/ralph-loop/ralph/internal/judge"
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
	// JudgeHere (--judge-on-coordinator, judge_on_coordinator:): every
	// story's gates run here, whatever the workers report.
	JudgeHere bool

	c   *cluster.Coordinator // once started
	out io.Writer            // where it reports
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
// $RALPH_NATS_TOKEN ("" when none), and where it came from.
func (n natsFlags) token(flag string) (token, from string, err error) {
	env := os.Getenv(TokenEnv)
	// Read once: the agents and gates this process starts do not inherit
	// it.
	_ = os.Unsetenv(TokenEnv)
	if flag != "" {
		return flag, "--token", nil
	}
	if n.TokenFile != "" {
		b, err := os.ReadFile(n.TokenFile)
		if err != nil {
			return "", "", usage.Errorf("--token-file: %v", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, "--token-file " + n.TokenFile, nil
		}
		return "", "", usage.Errorf("--token-file %s is empty", n.TokenFile)
	}
	if env != "" {
		return env, "$" + TokenEnv, nil
	}
	return "", "", nil
}

// requireCredentials refuses a connection to url that would give none:
// a NATS server that takes anyone lets anyone read the jobs and answer
// them. own says the client has its own key (a worker's --key).
func (n natsFlags) requireCredentials(url, token, flag string, own bool) error {
	if token != "" || n.Creds != "" || n.Cert != "" || own {
		return nil
	}
	if u, err := neturl.Parse(url); err == nil && u.User != nil {
		return nil
	}
	return usage.Errorf("%s %s: no NATS credentials: give --key (a worker's own key), --token, --token-file, $%s, --creds or a client certificate (--tls-cert)", flag, url, TokenEnv)
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
	co := &coordinatorFlags{out: f.IO.ErrOut}
	var cmd *cobra.Command
	cmd = newCmdRun(f, func(o *RunOptions) error {
		o.coord = co
		if runF != nil {
			return runF(o)
		}
		if err := o.applyConfig(cmd.Context()); err != nil {
			return err
		}
		if err := co.applyConfig(cmd.Context(), o); err != nil {
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
back into the story's worktree. The engine then judges the work as a local
run does.

Workers are trusted as CI runners are: a worker runs the story's gates on
the commit it pushes, and its results stand here only for exactly the tree
judged here (but for ralph's own bookkeeping, the PRD's passes mark): a
story whose work is built onto other work that landed since, or anything
put back or changed, has its gates run here. Every landed commit names who
ran its gates in a Ralph-Judged-By trailer (and .ralph/judged/<item>.jsonl
its "worker"). --judge-on-coordinator (judge_on_coordinator: true in
.ralph/config.yaml) runs every story's gates here, whatever the workers
report: for workers you do not trust to judge.

By default the coordinator embeds a NATS server on --listen (loopback unless
told otherwise). Give each worker its own key: ` + "`ralph cluster key add NAME`" + `
here makes one (the worker starts with --key FILE), and
` + "`ralph cluster key revoke NAME`" + ` shuts that worker out at once, while this
coordinator runs too.
Once the repository has worker keys, the server admits workers by their keys
only, and a report counts only when signed by a key not revoked. Without
keys it admits every client with its token: --token, or one generated on the
first start, printed once and kept in .ralph/nats-token (readable by you
only); workers give it with --token-file (a copy of that file) or
$RALPH_NATS_TOKEN, and every holder of the token is trusted as a worker.
With --listen-tls-cert and --listen-tls-key the server speaks TLS only
(workers trust it with --tls-ca). With --nats it uses an existing server or
cluster instead, with credentials (--token, --token-file, --creds or a
client certificate); the worker keys then sign the workers' reports.
The embedded server is in release binaries, the container image and
` + "`make build`" + `; a ralph built without the natsserver build tag (a plain
` + "`go run`" + ` or ` + "`go install`" + `) has none and needs --nats.

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
	natsUsage := "use the NATS server at `URL` instead of embedding one"
	if !cluster.EmbeddedServer {
		natsUsage = "the NATS server at `URL` (required: this ralph was built without the embedded one)"
	}
	fl.StringVar(&co.NATS, "nats", "", natsUsage)
	fl.StringVar(&co.Listen, "listen", cluster.DefaultListen, "the embedded NATS server's `ADDR` (host:port; port 0 picks one)")
	fl.StringVar(&co.Token, "token", "", "NATS `TOKEN` workers must give (default: generated once and kept in .ralph/nats-token)")
	fl.StringVar(&co.ListenCert, "listen-tls-cert", "", "the embedded NATS server's TLS certificate `FILE` (with --listen-tls-key): workers connect over TLS")
	fl.StringVar(&co.ListenKey, "listen-tls-key", "", "the embedded NATS server's TLS key `FILE`")
	fl.DurationVar(&co.Lease, "lease", cluster.DefaultLease, "how long a silent worker keeps its job before it goes to another (`DURATION`)")
	fl.BoolVar(&co.TakeOver, "take-over", false, "take the run over from the coordinator that holds it (one whose machine died), without waiting for its lease to run out")
	fl.DurationVar(&co.QueueTimeout, "queue-timeout", cluster.DefaultQueueTimeout, "how long a job may wait for a worker (`DURATION`) before the run stops for want of one")
	fl.DurationVar(&co.MaxPause, "max-pause", cluster.DefaultMaxPause, "the longest a rate limit a worker reports pauses every worker (`DURATION`), whatever reset time it names")
	fl.BoolVar(&co.JudgeHere, "judge-on-coordinator", false, "run every story's gates here, whatever the workers report (for workers you do not trust to judge)")
	co.conn.register(cmd)
	return cmd
}

// applyConfig takes the coordinator's settings from the config files
// where no flag gave them.
func (co *coordinatorFlags) applyConfig(ctx context.Context, o *RunOptions) error {
	if o.flagSet("judge-on-coordinator") {
		return nil
	}
	root, _, err := o.IO.Repo(ctx)
	if err != nil {
		return err
	}
	l, err := o.IO.Settings(root)
	if err != nil {
		return err
	}
	co.JudgeHere = l.JudgeOnCoordinator
	return nil
}

// Start checks the coordinator's flags, then starts it (cluster.Coordinator):
// NATS, the run's lease and settings there, and the agent that queues jobs.
func (co *coordinatorFlags) Start(ctx context.Context, o *app.Options, root string, repo *git.Repo, src engine.Source) (agent.Agent, error) {
	if co.Remote == "" {
		return nil, usage.Errorf("--remote is required: the git remote the coordinator and its workers exchange branches through")
	}
	if o.Pipeline != "" {
		return nil, usage.Errorf("ralph coordinator runs a PRD's stories or a task tree's tasks on workers: not --pipeline (its stages hand files to each other on one machine)")
	}
	if co.Lease < time.Second {
		return nil, usage.Errorf("--lease must be at least 1s")
	}
	if co.QueueTimeout < time.Second || co.MaxPause < time.Second {
		return nil, usage.Errorf("--queue-timeout and --max-pause must be at least 1s")
	}
	if co.NATS == "" && !cluster.EmbeddedServer {
		return nil, usage.Errorf("%v", cluster.ErrNoEmbeddedServer)
	}
	token, from, err := co.conn.token(co.Token)
	if err != nil {
		return nil, err
	}
	if co.NATS != "" {
		if err := co.conn.requireCredentials(co.NATS, token, "--nats", false); err != nil {
			return nil, err
		}
	}
	spec := cluster.AgentSpec{Name: o.Agent, Script: o.Script, Model: o.Model, Args: o.AgentArgs, BaseURL: o.BaseURL, Provider: o.Provider}
	if o.Agent == "cmd" && o.AgentCmd != "" {
		if spec.Command, err = proc.SplitArgs(o.AgentCmd); err != nil {
			return nil, usage.Errorf("--agent-cmd: %v", err)
		}
	}
	conn := co.conn.options(token, "")
	co.c = cluster.NewCoordinator(cluster.CoordinatorConfig{Remote: co.Remote, NATS: co.NATS, Listen: co.Listen, Conn: conn, TokenFrom: from,
		ListenCert: co.ListenCert, ListenKey: co.ListenKey, Lease: co.Lease, QueueTimeout: co.QueueTimeout, MaxPause: co.MaxPause,
		TakeOver: co.TakeOver, Fresh: o.Fresh, JudgeHere: co.JudgeHere, Spec: spec, GateTimeout: o.GateTimeout, Out: co.out})
	return co.c.Start(ctx, root, repo, src)
}

// runContext is the run's context, ended when the coordinator loses the
// run's lease.
func (co *coordinatorFlags) runContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if co.c == nil {
		return context.WithCancel(ctx)
	}
	return co.c.RunContext(ctx)
}

// Stop stops the coordinator, if it started.
func (co *coordinatorFlags) Stop(ctx context.Context, repo *git.Repo) {
	if co.c != nil {
		co.c.Stop(ctx, repo)
	}
}

// Judge makes j the coordinator's judge: the workers' gate results stand
// for exactly their trees (unless --judge-on-coordinator), and each
// landed commit names who ran its gates.
func (co *coordinatorFlags) Judge(j *judge.Judge) {
	j.Here = cluster.JudgedHere()
	if co.c != nil {
		j.Attested = co.c.Attester()
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
	// KeyFile is the worker's own key (`ralph cluster key add`).
	KeyFile string
	conn    natsFlags
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
did, run the story's gates on that commit (unless the coordinator judges
every story itself), push it, and report. The coordinator judges and lands;
a worker never commits to the feature branch.

A worker logs in with its own key (--key FILE, made by
` + "`ralph cluster key add NAME`" + ` on the coordinator's machine; the worker is NAME,
and the key signs each of its reports), or, where the coordinator has no
worker keys, with its token (--token-file or $` + TokenEnv + `). A worker whose key is
revoked is refused at once and stops, saying so.

A worker started before its coordinator waits for it. While it works it
renews its lease on the job; killed, its job goes to another worker when the
lease runs out (the coordinator's --lease). Stop it with Ctrl-C: the jobs it
had go back to the queue.`,
		Example: `  ralph worker --nats nats://127.0.0.1:4222 --key build-1.key
  ralph worker --nats tls://coordinator.lan:4222 --key build-1.key --tls-ca cert.pem --parallel 4 --dir /var/tmp/ralph
  ralph worker --nats nats://127.0.0.1:4222 --token-file nats-token
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
	fl.StringVar(&opts.KeyFile, "key", "", "the worker's own key `FILE` (`ralph cluster key add NAME` on the coordinator's machine): logs the worker in and signs its reports")
	fl.StringVar(&opts.Token, "token", "", "NATS `TOKEN` (better: --token-file or $"+TokenEnv+", which the process list does not show)")
	fl.DurationVar(&opts.RateLimitBackoff, "rate-limit-backoff", time.Minute, "pause every worker this long (`DURATION`) when an agent hits a limit without saying when it resets")
	fl.BoolVar(&opts.NoSandbox, "no-sandbox", false, "run the jobs' agents and gates without the sandbox (bubblewrap)")
	opts.conn.register(cmd)
	registerAgentFlags(fl, &opts.AgentFlags)
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
	if o.KeyFile != "" {
		if w.Key, err = cluster.ReadKeyFile(o.KeyFile); err != nil {
			return usage.Errorf("--key: %v", err)
		}
		w.ID = w.Key.Name
	}
	if err := app.ConfineWorker(w, dir, o.NoSandbox, o.BaseURL, o.Env); err != nil {
		return err
	}
	if o.flagSet("agent") {
		if w.Override, err = o.AgentFlags.Build(); err != nil {
			return err
		}
		w.OverrideName = o.Agent
	}
	token, _, err := o.conn.token(o.Token)
	if err != nil {
		return err
	}
	if err := o.conn.requireCredentials(o.NATS, token, "--nats", w.Key != nil); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A server that refuses the worker's credentials (its key revoked
	// while it runs, or never known) stops it: trying again would not
	// change the answer.
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	conn := o.conn.options(token, "ralph worker "+w.ID)
	conn.Own = w.Key
	conn.Refused = func(err error) {
		who := "its token"
		if w.Key != nil {
			who = "its key " + w.Key.Name + " (revoked, or not one the coordinator has: `ralph cluster key list` there)"
		}
		refuse(usage.Errorf("the NATS server at %s refused this worker's credentials (%v): %s", o.NATS, err, who))
	}
	nc, err := cluster.Connect(o.NATS, conn)
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
	err = w.Run(ctx)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if errors.Is(err, cluster.ErrNeedsKey) {
		return usage.Errorf("%v", err)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}
