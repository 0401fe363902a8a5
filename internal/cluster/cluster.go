// Package cluster spreads a run's agent iterations over worker processes on
// many machines. The coordinator is an ordinary `ralph run` over a PRD in
// parallel mode — its engine schedules, verifies, merges and keeps the
// state exactly as a local run does — whose agent is remote: each
// iteration becomes a job on a NATS JetStream work queue. A worker pulls
// the job, fetches the story's branch from a git remote, runs its agent
// in a tree of its own, pushes what the agent did and reports the agent's
// result. The coordinator fetches that commit into the story's worktree,
// and from there the iteration goes on like a local one: the gates run on
// the coordinator, and only a verified commit is merged ("passed" has one
// meaning, whoever ran the agent). A task tree runs the same way, one
// task at a time; its task files, which the agent edits but never
// commits, travel with the job (Job.Shared) and the agent's edits are
// merged back (RemoteAgent.Shared).
//
// JetStream carries everything that must outlive a process: the job
// stream (a work queue whose unacknowledged messages are redelivered when
// a worker's lease runs out), the results (a key-value bucket, one key per
// job, written once: a duplicate delivery cannot report twice), the run's
// settings, the shared rate-limit pause and the workers' heartbeats.
package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/store"
)

// Names are a run's JetStream stream, consumer and buckets: every run
// has its own (named after its branch), so a coordinator of one run never
// touches another's queue or state.
type Names struct {
	Run      string // the run's name
	Stream   string
	Subject  string
	Consumer string
	Settings string // the run's settings: config, ratelimit, state
	Results  string // one outcome per job claim
	Workers  string // one WorkerInfo per worker, expiring
	Files    string // a job's shared files: <key>/in/<path>, <key>/out/<path>
	Claims   string // one claim per job key: the worker running it
}

// NamesFor are the names of the run called run (SafeID of its branch).
func NamesFor(run string) Names {
	run = SafeID(run)
	return Names{Run: run, Stream: "RALPH_JOBS_" + run, Subject: "ralph.jobs." + run, Consumer: "workers",
		Settings: "ralph_" + run + "_run", Results: "ralph_" + run + "_results", Workers: "ralph_" + run + "_workers",
		Files: "ralph_" + run + "_files", Claims: "ralph_" + run + "_claims"}
}

const (
	keyConfig      = "config"
	keyRateLimit   = "ratelimit"
	KeyState       = "state" // the coordinator's run state, mirrored
	DefaultListen  = "127.0.0.1:4222"
	DefaultLease   = 30 * time.Second
	maxOutputBytes = 1 << 20
)

// AgentSpec names the agent a job runs, as the coordinator's flags gave
// it; a worker may override it with its own flags.
type AgentSpec struct {
	Name     string   `json:"name"`
	Command  []string `json:"command,omitempty"`
	Script   string   `json:"script,omitempty"`
	Model    string   `json:"model,omitempty"`
	Args     []string `json:"args,omitempty"`
	BaseURL  string   `json:"base_url,omitempty"`
	Provider string   `json:"provider,omitempty"`
}

// Build makes the agent.
func (s AgentSpec) Build() (agent.Agent, error) {
	return agent.New(s.Name, agent.Options{Command: s.Command, Script: s.Script, Model: s.Model, Args: s.Args, BaseURL: s.BaseURL, Provider: s.Provider})
}

// job is one agent iteration to run.
type job struct {
	Key       string        `json:"key"` // unique per iteration of a coordinator
	Item      string        `json:"item"`
	Role      string        `json:"role,omitempty"`
	Iteration int           `json:"iteration"`
	Attempt   int           `json:"attempt"`
	Branch    string        `json:"branch"` // the story's branch on the remote
	Base      string        `json:"base"`   // the commit to start from (refs/ralph/bases/<key>)
	Prompt    string        `json:"prompt"`
	Env       []string      `json:"env,omitempty"`
	Model     string        `json:"model,omitempty"`
	Timeout   time.Duration `json:"timeout,omitempty"`
	Agent     AgentSpec     `json:"agent"`
	// TreeEnv are the variables of Env that name a path in the tree,
	// relative to it ("." for the tree itself): the worker points them
	// into its own tree.
	TreeEnv map[string]string `json:"tree_env,omitempty"`
	// Shared are files the agent may edit that are never committed (a
	// task tree's tasks.jsonl), by path in the tree: true when the file
	// exists, its contents in the files bucket as <key>/in/<path>. Restore
	// are the paths the worker puts back as the base had them before it
	// commits.
	Shared  map[string]bool `json:"shared,omitempty"`
	Restore []string        `json:"restore,omitempty"`
	// Gates are the item's gates: the worker runs them on the commit it
	// pushes, and the coordinator uses their results for that exact tree
	// (the integrated tree's gates run on the coordinator).
	Gates       []gate.Gate   `json:"gates,omitempty"`
	GateTimeout time.Duration `json:"gate_timeout,omitempty"`
}

// claim says which worker runs a job (the latest delivery's): only its
// outcome counts. Proof is the SHA-256 of a secret the worker keeps until
// its outcome carries it, so no other client can report for it.
// Cancelled and Done are the coordinator's: the job is no longer wanted,
// or its outcome was taken.
type claim struct {
	Worker    string    `json:"worker,omitempty"`
	Host      string    `json:"host,omitempty"`
	Proof     string    `json:"proof,omitempty"`
	Delivery  uint64    `json:"delivery,omitempty"`
	At        time.Time `json:"at"`
	Cancelled bool      `json:"cancelled,omitempty"`
	Done      bool      `json:"done,omitempty"`
}

// proofOf is the proof a claim holds for secret.
func proofOf(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// resultKey is where the outcome of a claim goes: per claim, so that no
// other client's report can take its place.
func resultKey(key, proof string) string {
	if len(proof) > 16 {
		proof = proof[:16]
	}
	return key + "." + proof
}

// jobRef is where a claim's commit goes on the remote: per claim, so that
// a worker whose lease ran out and the one that took its job over never
// push to one ref.
func jobRef(key, proof string) string {
	if len(proof) > 16 {
		proof = proof[:16]
	}
	return "refs/ralph/jobs/" + key + "/" + proof
}

// outcome is a worker's report of a job.
type outcome struct {
	Key    string `json:"key"`
	Worker string `json:"worker"`
	Host   string `json:"host"`
	// Secret is what the claim's Proof is the hash of.
	Secret string       `json:"secret"`
	Commit string       `json:"commit,omitempty"` // pushed to jobRef(key, proof)
	Result agent.Result `json:"result"`
	Output string       `json:"output,omitempty"` // the agent's output (capped)
	Error  string       `json:"error,omitempty"`  // the job could not run
	// Shared are the job's shared files as the agent left them (true:
	// exists), in the files bucket as <key>/out/<path>; SharedSums their
	// SHA-256, so that what the coordinator reads is what the worker put.
	Shared     map[string]bool   `json:"shared,omitempty"`
	SharedSums map[string]string `json:"shared_sums,omitempty"`
	// Gates are the job's gates' results on Commit's tree (none when the
	// gates wrote into the tree: the coordinator runs them then).
	Gates []gate.Result `json:"gates,omitempty"`
	// Sig is the worker's signature of the rest with its key (base64),
	// when the run has worker keys.
	Sig string `json:"sig,omitempty"`
}

// signed is what a worker signs of an outcome: all of it but the
// signature. The coordinator checks the signature on the outcome as it
// decoded it, so what it uses is exactly what was signed.
func (o outcome) signed() []byte {
	o.Sig = ""
	b, _ := json.Marshal(o)
	return b
}

// sharedName is the name of a job's shared file in the files bucket.
func sharedName(key, dir, path string) string { return key + "/" + dir + "/" + path }

// RunConfig is what workers need to know of the run.
type RunConfig struct {
	Remote string        `json:"remote"`
	Lease  time.Duration `json:"lease"`
	// MaxPause bounds a rate-limit pause from the moment it was set: a
	// worker that claims a reset far ahead stalls nobody for longer.
	MaxPause time.Duration `json:"max_pause,omitempty"`
	// Signed: the coordinator counts only reports signed with a worker's
	// own key (it has worker keys): a worker without one cannot serve.
	Signed bool `json:"signed,omitempty"`
}

// DefaultMaxPause is the longest rate-limit pause when the run sets none.
const DefaultMaxPause = 30 * time.Minute

// WorkerInfo is a worker's heartbeat.
type WorkerInfo struct {
	ID    string    `json:"id"`
	Host  string    `json:"host"`
	Slots int       `json:"slots"`
	Items []string  `json:"items"`
	Agent string    `json:"agent,omitempty"` // its own override, if any
	Seen  time.Time `json:"seen"`
}

// pause is the shared rate-limit pause: no worker starts an agent before
// Until.
type pause struct {
	Until   time.Time `json:"until"`
	Message string    `json:"message"`
	Worker  string    `json:"worker"`
}

// ConnOptions are how to reach a NATS server, as the NATS client offers.
type ConnOptions struct {
	Token string // also accepted in the URL (nats://TOKEN@host:port)
	Creds string // a credentials file
	CA    string // a root CA file for TLS
	Cert  string // a client certificate (with Key) for mutual TLS
	Key   string
	// Own is a worker's (or the coordinator's) own key: with no other
	// credential it logs the client in (the embedded server with worker
	// keys).
	Own  *Key
	Name string
	// Refused, when set, hears the server refuse the client's
	// credentials (a revoked key): the client keeps trying otherwise.
	Refused func(error)
}

// Connect dials url and keeps trying, in the background, until a server
// answers: a worker started before its coordinator waits for it.
func Connect(url string, o ConnOptions) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(o.Name), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond), nats.ReconnectJitter(50*time.Millisecond, 50*time.Millisecond)}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.CA != "" {
		opts = append(opts, nats.RootCAs(o.CA))
	}
	if o.Cert != "" || o.Key != "" {
		opts = append(opts, nats.ClientCert(o.Cert, o.Key))
	}
	if o.Own != nil && o.Token == "" && o.Creds == "" && o.Cert == "" {
		opts = append(opts, nats.Nkey(o.Own.Public, o.Own.Sign))
	}
	if o.Refused != nil {
		refused := func(err error) {
			if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthRevoked) {
				o.Refused(err)
			}
		}
		opts = append(opts, nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { refused(err) }),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refused(err) }))
	}
	return nats.Connect(url, opts...)
}

// ServerAuth is how the embedded server admits clients: by the token
// every client gives, or — once there are worker keys — by key alone:
// the coordinator's own (Self) and the workers' keys not revoked (Keys);
// and, with a certificate and its key, over TLS.
type ServerAuth struct {
	Token           string
	Self            *Key
	Keys            []WorkerKey
	TLSCert, TLSKey string
}

// ErrNoEmbeddedServer is StartServer's answer in a build without the
// server (EmbeddedServer false): what to do instead.
var ErrNoEmbeddedServer = errors.New("this ralph was built without the embedded NATS server: give `ralph coordinator` a NATS server with JetStream (`nats-server -js`) as --nats nats://HOST:4222, or install a ralph that has one: a release binary, `make build`, or `go install -tags natsserver github.com/ralph-loop/ralph/cmd/ralph@latest`")

// Loopback reports whether host only reaches this machine.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Setup creates (or updates) the run's stream, consumer and buckets, and
// publishes its settings. Jobs a previous coordinator of the run left
// queued are dropped: its engine state says which iterations to run
// again. The caller holds the run's lease.
func Setup(ctx context.Context, js jetstream.JetStream, n Names, cfg RunConfig) error {
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: n.Stream, Subjects: []string{n.Subject},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute})
	if err != nil {
		return fmt.Errorf("creating the job stream: %w", err)
	}
	if err := st.Purge(ctx); err != nil {
		return err
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, n.Stream, jetstream.ConsumerConfig{Durable: n.Consumer, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: cfg.Lease, MaxDeliver: -1, MaxAckPending: 10000}); err != nil {
		return fmt.Errorf("creating the workers' consumer: %w", err)
	}
	run, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.Settings, Storage: jetstream.FileStorage})
	if err != nil {
		return err
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.Results, Storage: jetstream.FileStorage}); err != nil {
		return err
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.Workers, Storage: jetstream.FileStorage, TTL: 3 * cfg.Lease}); err != nil {
		return err
	}
	if _, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: n.Files, Storage: jetstream.FileStorage}); err != nil {
		return err
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.Claims, Storage: jetstream.FileStorage}); err != nil {
		return err
	}
	b, _ := json.Marshal(cfg)
	_, err = run.Put(ctx, keyConfig, b)
	return err
}

var keyUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// jobKey is the job's key: a NATS subject token and a git ref component.
// It begins with the run's name and "=" (which no run name holds), so
// that a coordinator can tell its run's job refs on a shared remote from
// other runs' (pruneRefs).
func jobKey(run string, epoch int64, iteration int, item string) string {
	return fmt.Sprintf("%s=%d-%d-%s", run, epoch, iteration, SafeID(item))
}

// Workers lists the workers whose heartbeat has not expired.
func Workers(ctx context.Context, js jetstream.JetStream, n Names) ([]WorkerInfo, error) {
	kv, err := js.KeyValue(ctx, n.Workers)
	if err != nil {
		return nil, err
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []WorkerInfo
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var w WorkerInfo
		if json.Unmarshal(e.Value(), &w) == nil {
			out = append(out, w)
		}
	}
	return out, nil
}

// capped keeps the first max bytes written, and counts the rest.
type capped struct {
	b       []byte
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	room := maxOutputBytes - len(c.b)
	if room > len(p) {
		room = len(p)
	}
	c.b = append(c.b, p[:room]...)
	c.dropped += len(p) - room
	return len(p), nil
}

func (c *capped) String() string {
	if c.dropped > 0 {
		return string(c.b) + fmt.Sprintf("\n[ralph worker] %d more bytes of output not sent\n", c.dropped)
	}
	return string(c.b)
}

// SafeID makes s usable as a KV key.
func SafeID(s string) string {
	return strings.Trim(keyUnsafe.ReplaceAllString(s, "_"), "_")
}

// WorkersFile is where a coordinator mirrors the workers it hears from,
// in the run's folder, for readers that never join NATS (`ralph status`,
// the dashboard).
const WorkersFile = "workers.json"

// workersFresh is how old the file may be and still describe a live run.
const workersFresh = 10 * time.Second

// WriteWorkersFile writes ws to dir's workers file.
func WriteWorkersFile(dir string, ws []WorkerInfo) error {
	return writeMirror(filepath.Join(dir, WorkersFile), ws)
}

// RemoveWorkersFile removes it, and the jobs file, when the coordinator
// stops.
func RemoveWorkersFile(dir string) {
	_ = os.Remove(filepath.Join(dir, WorkersFile))
	_ = os.Remove(filepath.Join(dir, JobsFile))
}

// ReadWorkersFile is the coordinator's list of workers in dir, or nil
// when there is none or it is stale (a coordinator that died).
func ReadWorkersFile(dir string) []WorkerInfo {
	return readMirror[WorkerInfo](filepath.Join(dir, WorkersFile))
}

// JobInfo is one of the coordinator's jobs as status shows it: queued (no
// worker holds it) or running on a worker.
type JobInfo struct {
	Item   string    `json:"item"`
	Key    string    `json:"key"`
	State  string    `json:"state"` // queued | running
	Worker string    `json:"worker,omitempty"`
	Host   string    `json:"host,omitempty"`
	Since  time.Time `json:"since"`
}

// Job states.
const (
	JobQueued  = "queued"
	JobRunning = "running"
)

// JobsFile is where a coordinator mirrors its jobs, beside WorkersFile.
const JobsFile = "jobs.json"

// WriteJobsFile writes js to dir's jobs file.
func WriteJobsFile(dir string, js []JobInfo) error {
	return writeMirror(filepath.Join(dir, JobsFile), js)
}

// ReadJobsFile is the coordinator's jobs in dir, or nil when there is no
// fresh file.
func ReadJobsFile(dir string) []JobInfo {
	return readMirror[JobInfo](filepath.Join(dir, JobsFile))
}

// writeMirror writes list to path, one of the coordinator's mirrors for
// status and the dashboard. A mirror is rewritten every second: a crash
// loses nothing it cannot write again, so no fsync.
func writeMirror[T any](path string, list []T) error {
	if list == nil {
		list = []T{}
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return store.WriteFileNoSync(path, append(b, '\n'), 0o644)
}

// readMirror is the list a mirror holds, or nil when there is none or it
// is stale (its coordinator died).
func readMirror[T any](path string) []T {
	fi, err := os.Stat(path)
	if err != nil || time.Since(fi.ModTime()) > workersFresh {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var list []T
	if json.Unmarshal(b, &list) != nil {
		return nil
	}
	return list
}
