package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
)

// ErrUnavailable wraps why no sandbox can start here.
var ErrUnavailable = errors.New("the sandbox cannot start")

// Sandbox confines the agents and gates of one run.
type Sandbox struct {
	Policy
	bwrap  string // bubblewrap's path
	helper string // ralph's own binary, the init when a proxy is needed

	mu     sync.Mutex
	record Record
}

// Record is what a run's confinements were denied, kept in
// .ralph/sandbox.json for `ralph status` and the dashboard.
type Record struct {
	Engine    string    `json:"engine"`
	Started   time.Time `json:"started"`
	Confined  int       `json:"confined"` // agent runs and gate commands confined so far
	Denied    []Denial  `json:"denied,omitempty"`
	AgentNet  string    `json:"agent_network"`
	Allowed   []string  `json:"allowed_hosts,omitempty"` // configured for every agent (each adds its model's API)
	Writable  []string  `json:"writable,omitempty"`
	Hidden    []string  `json:"hidden,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Denial is one host a confined command was refused.
type Denial struct {
	Host  string    `json:"host"`
	By    string    `json:"by"` // what asked: "agent claude · US-001", "gate test"
	Count int       `json:"count"`
	Last  time.Time `json:"last"`
}

// RecordFile is where a run's Record is kept in ralph's state folder.
func RecordFile(stateDir string) string { return filepath.Join(stateDir, "sandbox.json") }

// ReadRecord reads the Record a run left in stateDir (nil when none).
func ReadRecord(stateDir string) *Record {
	var r Record
	if err := store.ReadJSON(RecordFile(stateDir), &r); err != nil || r.Engine == "" {
		return nil
	}
	return &r
}

// New finds bubblewrap and proves it can start a sandbox here; the error
// says what to do instead (install it, or --no-sandbox).
func New(p Policy) (*Sandbox, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w: the sandbox uses bubblewrap, which needs Linux (this is %s); run with --no-sandbox", ErrUnavailable, runtime.GOOS)
	}
	bw, err := Bwrap()
	if err != nil {
		return nil, err
	}
	if p.AgentNetwork == "" {
		p.AgentNetwork = NetProxy
	}
	if p.Caches == nil {
		p.Caches = DefaultCaches()
	}
	removeOrphans()
	s := &Sandbox{Policy: p, bwrap: bw, helper: helperPath()}
	s.record = Record{Engine: "bwrap", Started: time.Now().UTC(), AgentNet: p.AgentNetwork, Allowed: newAllowlist(p.AllowHosts).list()}
	for _, w := range append(append([]string{}, p.Writable...), p.Caches...) {
		s.record.Writable = append(s.record.Writable, expand(w))
	}
	for _, h := range append(append([]string{}, DefaultHidden...), p.Hidden...) {
		s.record.Hidden = append(s.record.Hidden, expand(h))
	}
	return s, nil
}

var (
	probeOnce sync.Once
	probePath string
	probeErr  error
)

// Bwrap is bubblewrap's path once it has been seen to start a sandbox
// (asked once per process).
func Bwrap() (string, error) {
	probeOnce.Do(func() { probePath, probeErr = probe() })
	return probePath, probeErr
}

// probe finds bwrap on $PATH and starts one sandbox with it.
func probe() (string, error) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("%w: bubblewrap (bwrap) is not installed; install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) or run with --no-sandbox", ErrUnavailable)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net", "--die-with-parent", "true")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s could not start a sandbox (%s); allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile for bwrap), or run with --no-sandbox",
			ErrUnavailable, path, strings.TrimSpace(firstNonEmpty(stderr.String(), err.Error())))
	}
	return path, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// helperPath is ralph's own binary as the command line named it when
// that resolves (a test's `ralph` link keeps its name, which is how the
// test binary knows to act as ralph), else the running executable.
func helperPath() string {
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	p, _ := os.Executable()
	return p
}

// Use is one confinement: an agent's run (all the commands it starts) or
// one gate command.
type Use struct {
	Label    string   // what runs: "agent claude · US-001 iteration 3", "gate test"
	Dir      string   // the work tree (its top is found from here)
	Network  string   // NetNone, NetProxy or NetHost
	Hosts    []string // allowed besides Policy.AllowHosts (the model's API)
	Writable []string // besides the policy's
	// State is the agent CLI's own state (StateDirs): folders made when
	// missing, then bound writable like Writable.
	State []string
	// Binds are writable folders shown at another path: a scratch that
	// ralph copies out of, over a folder the agent must not write.
	Binds map[string]string // inside path → outside folder
	// Tree, when set, is shown (writable) at the work tree's own path
	// instead of the work tree: the judge's checkout of exactly the commit
	// it judges, so absolute paths (a virtualenv's scripts) point into it.
	// Nothing of the real work tree or its git folders is visible there.
	Tree string
}

// Session is an open confinement; it is a proc.Confiner.
type Session struct {
	sb      *Sandbox
	use     Use
	dir     string // the session's own folder: private tmp, sockets
	tmp     string
	network string
	allow   allowlist
	gw      *gateway
	listen  []string // -l ADDR=SOCKET for the init
	proxy   string   // the proxy's address inside

	mu     sync.Mutex
	denied map[string]int
}

// Open readies a confinement: its private tmp and, with NetProxy, the
// gateway the sandbox's network reaches the allowed hosts through.
func (s *Sandbox) Open(u Use) (*Session, error) {
	if u.Dir == "" {
		u.Dir, _ = os.Getwd()
	}
	u.Dir = expand(u.Dir)
	dir, err := os.MkdirTemp(socketRoot(), sessionPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	for _, p := range u.State {
		p = expand(p)
		if !strings.HasSuffix(p, ".json") {
			_ = os.MkdirAll(p, 0o700)
		}
		u.Writable = append(u.Writable, p)
	}
	ss := &Session{sb: s, use: u, dir: dir, tmp: filepath.Join(dir, "tmp"), network: u.Network, denied: map[string]int{}}
	if err := os.Mkdir(ss.tmp, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if ss.network == "" {
		ss.network = NetNone
	}
	ss.allow = newAllowlist(append(append([]string{}, s.AllowHosts...), u.Hosts...))
	if ss.network == NetProxy && ss.allow.empty() {
		// Nothing to reach: no proxy, and no init to start (the
		// network's own loopback is all there is).
		ss.network = NetNone
	}
	if ss.network == NetProxy {
		if err := ss.openGateway(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	s.mu.Lock()
	s.record.Confined++
	s.saveLocked()
	s.mu.Unlock()
	return ss, nil
}

// sessionPrefix starts a session folder's name, then ralph's pid and a
// dash: a folder whose ralph is gone (killed, say) is removed by the next
// New.
const sessionPrefix = "ralph-sandbox-"

// removeOrphans removes the session folders whose ralph no longer runs.
func removeOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(socketRoot(), sessionPrefix+"*-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), sessionPrefix), "-", 2)[0])
		if err == nil && pid != os.Getpid() && !proc.Alive(pid) {
			os.RemoveAll(d)
		}
	}
}

// socketRoot is where sessions keep their folder: the temp folder, unless
// its path is too long for a unix socket's name.
func socketRoot() string {
	t := os.TempDir()
	if len(t) > 60 {
		return "/tmp"
	}
	return t
}

// proxyPort is where the proxy listens on the sandbox's own loopback.
const proxyPort = 3128

func (ss *Session) openGateway() error {
	g := &gateway{allow: ss.allow, denied: ss.deny}
	ln, err := net.Listen("unix", filepath.Join(ss.dir, "proxy.sock"))
	if err != nil {
		return err
	}
	g.serveProxy(ln)
	port := proxyPort
	taken := map[string]bool{}
	for i, hp := range ss.allow.loopback() {
		_, p, _ := net.SplitHostPort(hp)
		taken[p] = true
		sock := filepath.Join(ss.dir, "fwd-"+strconv.Itoa(i)+".sock")
		fl, err := net.Listen("unix", sock)
		if err != nil {
			g.close()
			return err
		}
		g.serveForward(fl, hp)
		h, _, _ := net.SplitHostPort(hp)
		if h == "localhost" {
			hp = net.JoinHostPort("127.0.0.1", p)
		}
		ss.listen = append(ss.listen, "-l", hp+"="+sock)
	}
	for taken[strconv.Itoa(port)] {
		port++
	}
	ss.proxy = "127.0.0.1:" + strconv.Itoa(port)
	ss.listen = append(ss.listen, "-l", ss.proxy+"="+filepath.Join(ss.dir, "proxy.sock"))
	ss.gw = g
	return nil
}

func (ss *Session) deny(hostport string) {
	ss.mu.Lock()
	ss.denied[hostport]++
	ss.mu.Unlock()
	ss.sb.noteDenied(ss.use.Label, hostport)
}

// mounts are the session's mounts for a command in dir.
func (ss *Session) mounts(dir string) []mount {
	root := workRoot(dir)
	var mounts []mount
	rw := func(p string) { mounts = append(mounts, mount{kind: "rw", path: expand(p)}) }
	ro := func(p string) { mounts = append(mounts, mount{kind: "ro", path: expand(p)}) }
	if ss.use.Tree != "" {
		mounts = append(mounts, mount{kind: "rw", path: root, src: ss.use.Tree})
	} else {
		rw(root)
		if dir != root && !strings.HasPrefix(dir, root+string(filepath.Separator)) {
			rw(dir)
		}
		grw, gro := gitPaths(root)
		for _, p := range grw {
			rw(p)
		}
		for _, p := range ss.sb.Protect {
			ro(p)
		}
		for _, p := range gro {
			ro(p)
		}
	}
	for _, p := range ss.sb.Caches {
		rw(p)
	}
	for _, p := range ss.sb.Writable {
		rw(p)
	}
	for _, p := range ss.use.Writable {
		rw(p)
	}
	// The session's folder (its sockets) and ralph's binary (the init)
	// are shown at their paths even where the sandbox has a /dev of its
	// own (a tmpfs in /dev/shm).
	ro(ss.dir)
	if len(ss.listen) > 0 {
		ro(ss.sb.helper)
	}
	rw(ss.tmp)
	for inside, outside := range ss.use.Binds {
		mounts = append(mounts, mount{kind: "rw", path: expand(inside), src: outside})
	}
	for _, h := range append(append([]string{}, DefaultHidden...), ss.sb.Hidden...) {
		mounts = append(mounts, mount{kind: "hide", path: expand(h)})
	}
	if ss.use.Tree != "" {
		// Nothing of the real work tree shows through the checkout: a
		// writable path at or in it (the user's config may name the
		// repository) is not bound; the session's own folders are.
		kept := mounts[:0]
		for i, m := range mounts {
			in := m.path == root || strings.HasPrefix(m.path, root+string(filepath.Separator))
			if i == 0 || !in || m.path == ss.dir || m.path == ss.tmp || m.kind == "hide" {
				kept = append(kept, m)
			}
		}
		mounts = kept
	}
	return mounts
}

// MayWrite reports whether a confined process of this session could write
// path (for the native agent's file tools, which write from ralph's own
// process): the deepest mount at or above it decides.
func (ss *Session) MayWrite(path string) bool {
	path = expand(path)
	best, kind := -1, "ro"
	for _, m := range ss.mounts(ss.use.Dir) {
		if path != m.path && !strings.HasPrefix(path, m.path+string(filepath.Separator)) {
			continue
		}
		if d := depth(m.path); d >= best {
			best, kind = d, m.kind
		}
	}
	return kind == "rw"
}

// Confine rewrites c to run inside the session's sandbox.
func (ss *Session) Confine(c proc.Cmd) (proc.Cmd, func(), error) {
	dir := c.Dir
	if dir == "" {
		dir = ss.use.Dir
	}
	dir = expand(dir)
	mounts := ss.mounts(dir)
	env := map[string]string{"TMPDIR": ss.tmp, "TMP": ss.tmp, "TEMP": ss.tmp, "RALPH_SANDBOX": "bwrap"}
	for _, kv := range c.Env {
		if k, _, _ := strings.Cut(kv, "="); isProxyEnv(k) {
			env[k] = "\x00unset"
		}
	}
	if ss.proxy != "" {
		u := "http://" + ss.proxy
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = u
		}
	}
	argv := append([]string{ss.sb.bwrap}, bwrapArgs(ss.network != NetHost, mounts, dir, env)...)
	argv = append(argv, "--")
	if len(ss.listen) > 0 {
		argv = append(argv, ss.sb.helper, InitArg)
		argv = append(argv, ss.listen...)
		argv = append(argv, "--")
	}
	c.Argv = append(argv, c.Argv...)
	return c, func() {}, nil
}

// Denied lists the hosts this session was refused, with how often.
func (ss *Session) Denied() []string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []string
	for h, n := range ss.denied {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s (%d times)", h, n))
		} else {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

// Describe says in one line what the session allows.
func (ss *Session) Describe() string {
	net := "no network"
	switch ss.network {
	case NetHost:
		net = "the host's network"
	case NetProxy:
		net = "network only to " + strings.Join(ss.allow.list(), ", ")
		if ss.allow.empty() {
			net = "no network (every request to the proxy is denied and recorded)"
		}
	}
	return fmt.Sprintf("sandboxed (bubblewrap): writes only to %s, git's folders, a private tmp and the caches; %s", workRoot(ss.use.Dir), net)
}

// Close ends the session: the gateway stops, the private tmp goes.
func (ss *Session) Close() {
	if ss.gw != nil {
		ss.gw.close()
	}
	os.RemoveAll(ss.dir)
}

func (s *Sandbox) noteDenied(by, host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	found := false
	for i := range s.record.Denied {
		if d := &s.record.Denied[i]; d.Host == host && d.By == by {
			d.Count++
			d.Last = now
			found = true
		}
	}
	if !found {
		s.record.Denied = append(s.record.Denied, Denial{Host: host, By: by, Count: 1, Last: now})
	}
	s.saveLocked()
}

// Save writes the run's record (RecordDir/sandbox.json).
func (s *Sandbox) Save() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saveLocked()
}

func (s *Sandbox) saveLocked() {
	if s.RecordDir == "" {
		return
	}
	s.record.UpdatedAt = time.Now().UTC()
	_ = os.MkdirAll(s.RecordDir, 0o755)
	if b, err := json.MarshalIndent(s.record, "", "  "); err == nil {
		// Not fsynced: a record for people, rewritten at every start.
		_ = store.WriteFileNoSync(RecordFile(s.RecordDir), append(b, '\n'), 0o644)
	}
}

// Gates returns a proc.Runner that confines every command it runs as a
// gate: no network unless the gate's is set (GateNetwork, by the gate's
// name in $RALPH_GATE).
func (s *Sandbox) Gates(inner proc.Runner) proc.Runner {
	return gateRunner{s: s, inner: inner}
}

type gateRunner struct {
	s     *Sandbox
	inner proc.Runner
}

type treeKey struct{}

// WithTree has the gates run under ctx see tree (a checkout of the
// commit the judge judges) at their work tree's path (Use.Tree).
func WithTree(ctx context.Context, tree string) context.Context {
	return context.WithValue(ctx, treeKey{}, tree)
}

// GateEnv names the variable that carries a gate's name to its command.
const GateEnv = "RALPH_GATE"

func (g gateRunner) Run(ctx context.Context, c proc.Cmd) (proc.Result, error) {
	name := ""
	for _, kv := range c.Env {
		if v, ok := strings.CutPrefix(kv, GateEnv+"="); ok {
			name = v
		}
	}
	network := g.s.GateNetwork[name]
	if network == "" {
		network = g.s.GateNetwork["*"]
	}
	label := "gate"
	if name != "" {
		label += " " + name
	}
	tree, _ := ctx.Value(treeKey{}).(string)
	ss, err := g.s.Open(Use{Label: label, Dir: c.Dir, Network: network, Tree: tree})
	if err != nil {
		return proc.Result{ExitCode: -1}, err
	}
	defer ss.Close()
	return g.inner.Run(proc.WithConfiner(ctx, ss), c)
}

// Summary is the record in one line, for `ralph status` and the
// dashboard: that the run's agents and gates ran sandboxed, and which
// hosts they were denied.
func (r *Record) Summary() string {
	if r == nil {
		return ""
	}
	s := fmt.Sprintf("on (bubblewrap): %d confined, agents' network %s, gates' none unless set", r.Confined, r.AgentNet)
	if len(r.Denied) == 0 {
		return s + "; nothing denied"
	}
	var ds []string
	for _, d := range r.Denied {
		x := d.Host + " (" + d.By
		if d.Count > 1 {
			x += fmt.Sprintf(", %d times", d.Count)
		}
		ds = append(ds, x+")")
	}
	return s + "; denied " + strings.Join(ds, ", ")
}

// Explain says what the sandbox allows, for `ralph doctor`; hosts are the
// run's agent's model API.
func (s *Sandbox) Explain(hosts []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bubblewrap (%s) starts here. Writable: the work tree, git's objects, refs, index and logs, a private tmp", s.bwrap)
	if len(s.record.Writable) > 0 {
		fmt.Fprintf(&b, ", %s", strings.Join(s.record.Writable, ", "))
	}
	b.WriteString(", the agent CLI's own state. Read-only: everything else, ralph's state folder and .git/config, hooks and info. ")
	fmt.Fprintf(&b, "Hidden: %s. ", strings.Join(s.record.Hidden, ", "))
	switch s.AgentNetwork {
	case NetHost:
		b.WriteString("Agents' network: the host's, unfiltered (network: host). ")
	default:
		allowed := newAllowlist(append(append([]string{}, s.AllowHosts...), hosts...)).list()
		if len(allowed) == 0 {
			b.WriteString("Agents' network: none. ")
		} else {
			fmt.Fprintf(&b, "Agents' network: only %s, through ralph's proxy. ", strings.Join(allowed, ", "))
		}
	}
	gates := "Gates' network: none"
	if d := s.GateNetwork["*"]; d != "" {
		gates = "Gates' network: " + d
	}
	var named []string
	for name, n := range s.GateNetwork {
		if name != "*" {
			named = append(named, name+": "+n)
		}
	}
	sort.Strings(named)
	if len(named) > 0 {
		gates += " (" + strings.Join(named, ", ") + ")"
	}
	return b.String() + gates
}
