package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/proc"
)

// Use is one confinement: an agent's run (all the commands it starts) or
// the gates of one judging.
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
	// Gate makes it a gates' confinement: the repository's gate home (its
	// caches, which no agent can write), no agent CLI state and no model
	// keys in the environment.
	Gate bool
	// Tree, when set, is a folder shown writable at the work tree's own
	// path (Dir's top) in place of the work tree, with the repository's
	// .git read-only at its place inside: the gates judge a checkout of a
	// commit at the path its absolute paths (a virtualenv's shebangs)
	// name. The work tree itself is then not visible at that path.
	Tree string
	// ReadOnly are absolute paths inside writable places (files or
	// folders of the work tree) shown read-only: writing, removing or
	// renaming one fails (EROFS, EBUSY). Missing ones are skipped,
	// without a stat each: a few thousand cost one bind each, no more.
	ReadOnly []string
	// Mounts are more folders shown at other paths (a dependency folder's
	// snapshot at its place in the checkout).
	Mounts []Mount
	// Env are KEY=VALUE set for every command, after the allowlist.
	Env []string
	// Agent is the agent CLI (an adapter's name) whose settings the
	// session guards: its settings folders read-only, its settings files
	// compared after the run (CheckSettings).
	Agent string
}

// Mount is a folder Src shown at Dst inside the sandbox; a missing Src
// is skipped. A Dst that does not exist is made for the session and
// removed when it ends.
type Mount struct {
	Src, Dst string
	Writable bool
}

// Session is an open confinement; it is a proc.Confiner.
type Session struct {
	sb         *Sandbox
	use        Use
	dir        string // the session's own folder: private tmp, sockets
	tmp        string
	network    string
	allow      allowlist
	gw         *gateway
	listen     []string // -l ADDR=SOCKET for the init
	proxy      string   // the proxy's address inside
	home       *home
	env        []string // set in every command: HOME, TMPDIR, the proxy, Go's
	made       []string // mount points made on the host, removed at Close
	guard      *settingsGuard
	settingsRO []mount // the agent CLI's settings folders

	mu     sync.Mutex
	label  string // who asks now (a gate session serves several gates)
	denied map[string]int
	mounts map[string][]mount // by the command's folder, built once
	scan   *causeScanner      // an agent's output, read for what it was refused (Watch)
}

// Open readies a confinement: its private tmp and home and, with
// NetProxy, the gateway the sandbox's network reaches the allowed hosts
// through.
func (s *Sandbox) Open(u Use) (*Session, error) {
	if u.Dir == "" {
		u.Dir, _ = os.Getwd()
	}
	u.Dir = expand(u.Dir)
	if u.Tree != "" {
		u.Tree = expand(u.Tree)
	}
	dir, err := os.MkdirTemp(socketRoot(), sessionPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	ss := &Session{sb: s, use: u, dir: dir, tmp: "/tmp", network: u.Network, label: u.Label,
		denied: map[string]int{}, mounts: map[string][]mount{}}
	fail := func(err error) (*Session, error) {
		ss.Close()
		return nil, err
	}
	for i, p := range u.State {
		p = expand(p)
		if !strings.HasSuffix(p, ".json") {
			_ = os.MkdirAll(p, 0o700)
		}
		ss.use.State[i] = p
	}
	root := workRoot(u.Dir)
	kind := homeAgent
	if u.Gate {
		kind = homeGate
	}
	if ss.home, err = s.homeFor(kind, root); err != nil {
		return fail(fmt.Errorf("the sandbox's private home: %w", err))
	}
	if err := ss.makeMountPoints(root); err != nil {
		return fail(err)
	}
	if u.Agent != "" && !u.Gate {
		g, ro := guardSettings(u.Label, SettingsOf(u.Agent))
		ss.guard = g
		for _, p := range ro {
			ss.settingsRO = append(ss.settingsRO, mount{kind: "ro", path: p})
			if in, ok := ss.inHome(p); ok {
				ss.settingsRO = append(ss.settingsRO, mount{kind: "ro", path: in, src: p})
			}
		}
	}
	if ss.network == "" {
		ss.network = NetNone
	}
	ss.allow = newAllowlist(append(append([]string{}, s.AllowHosts...), u.Hosts...))
	if u.Gate {
		// A gate's hosts are its own (gate_hosts), not the agents'. One
		// without a network gets no proxy either (its init would cost
		// every gate command a start): what it tried to reach is read
		// from its output (cause.go).
		ss.allow = newAllowlist(u.Hosts)
	}
	if ss.network == NetProxy && ss.allow.empty() {
		// Nothing to reach: no proxy, and no init to start (the
		// network's own loopback is all there is).
		ss.network = NetNone
	}
	if ss.network == NetProxy {
		if err := ss.openGateway(); err != nil {
			return fail(err)
		}
	}
	ss.env = ss.fixedEnv()
	if !u.Gate {
		s.count()
	}
	return ss, nil
}

// count notes one more confined agent run or gate command.
func (s *Sandbox) count() {
	s.mu.Lock()
	s.record.Confined++
	s.saveSoon()
	s.mu.Unlock()
}

// homeFor is the repository's private home of a kind, seeded once per
// run.
func (s *Sandbox) homeFor(kind, root string) (*home, error) {
	repo := repoOf(root)
	key := keyOf(repo)
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.homes[kind+"/"+key]; h != nil {
		return h, nil
	}
	real, _ := os.UserHomeDir()
	spec := homeSpec{real: real, hidden: s.hidden, special: AllStateDirs()}
	for _, c := range s.Caches {
		spec.caches = append(spec.caches, expand(c))
	}
	h, err := seedHome(filepath.Join(HomesDir(), key, kind), spec)
	if err != nil {
		return nil, err
	}
	recordRepository(filepath.Join(HomesDir(), key), repo)
	s.homes[kind+"/"+key] = h
	return h, nil
}

// makeMountPoints makes what bubblewrap would otherwise make on the
// host inside a writable folder: the state's place in the private home
// (kept), the checkout's .git and the mounts' destinations (removed at
// Close).
func (ss *Session) makeMountPoints(root string) error {
	for _, p := range ss.use.State {
		if in, ok := ss.inHome(p); ok {
			if err := makeLike(p, in); err != nil {
				return err
			}
		}
	}
	if ss.use.Tree != "" {
		inTree := filepath.Join(ss.use.Tree, ".git")
		if _, err := os.Lstat(inTree); os.IsNotExist(err) {
			if err := makeLike(filepath.Join(root, ".git"), inTree); err != nil {
				return err
			}
			ss.made = append(ss.made, inTree)
		}
	}
	for _, m := range ss.use.Mounts {
		dst := ss.outside(expand(m.Dst), root)
		if _, err := os.Lstat(dst); !os.IsNotExist(err) {
			continue
		}
		top := dst
		for up := filepath.Dir(top); up != top && !exists(up); up = filepath.Dir(top) {
			top = up
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("the sandbox cannot show %s at %s: %w", m.Src, m.Dst, err)
		}
		ss.made = append(ss.made, top)
	}
	return nil
}

// outside is where an inside path is on the host: in the checkout when
// it is under the work tree and Tree is set.
func (ss *Session) outside(p, root string) string {
	if ss.use.Tree != "" {
		if r, err := filepath.Rel(root, p); err == nil && filepath.IsLocal(r) {
			return filepath.Join(ss.use.Tree, r)
		}
	}
	return p
}

// inHome is where the user's path p is in the private home.
func (ss *Session) inHome(p string) (string, bool) {
	if ss.home.real == "" || ss.home.real == "/" {
		return "", false
	}
	r, err := filepath.Rel(ss.home.real, p)
	if err != nil || !filepath.IsLocal(r) {
		return "", false
	}
	return filepath.Join(ss.home.dir, r), true
}

// makeLike makes an empty folder (or file) at p for like, when like is
// there.
func makeLike(like, p string) error {
	st, err := os.Stat(like)
	if err != nil {
		return nil
	}
	if st.IsDir() {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
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

// socketRoot is where sessions keep their folder: a tmpfs when there is
// one (the user's runtime folder, /dev/shm: a session's files are made
// and removed at every agent run, which on a busy disk costs
// milliseconds each), else the temp folder, unless its path is too long
// for a unix socket's name.
func socketRoot() string {
	socketRootOnce.Do(func() {
		for _, d := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/dev/shm"} {
			if d == "" || len(d) > 60 {
				continue
			}
			if f, err := os.CreateTemp(d, ".ralph-probe-"); err == nil {
				f.Close()
				os.Remove(f.Name())
				socketRootDir = d
				return
			}
		}
		socketRootDir = os.TempDir()
		if len(socketRootDir) > 60 {
			socketRootDir = "/tmp"
		}
	})
	return socketRootDir
}

var (
	socketRootOnce sync.Once
	socketRootDir  string
)

// ScratchRoot is where ralph keeps the short-lived folders it shows an
// agent (its prompt and output files, a plan's scratch): a tmpfs when
// there is one.
func ScratchRoot() string { return socketRoot() }

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
	label := ss.label
	ss.mu.Unlock()
	ss.sb.noteDenied(label, hostport)
}

// privateRoots are the folders of the user's session every sandbox gets
// an empty one of its own of: the temp folders (tmux's, ssh-agent's and
// X11's sockets live there) and /run (the user's runtime folder, D-Bus,
// Docker).
func privateRoots() []string {
	out := []string{"/tmp", "/var/tmp", "/run"}
	if st, err := os.Lstat("/var/run"); err == nil && st.IsDir() {
		out = append(out, "/var/run")
	}
	return out
}

// runKept are the files under /run the system needs read (the resolver's
// configuration behind /etc/resolv.conf; NixOS's system profile), shown
// over the private /run.
func runKept() []string {
	var out []string
	if p, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && underAny(p, privateRoots()) {
		out = append(out, p)
	}
	for _, p := range []string{"/run/current-system", "/run/booted-system", "/run/opengl-driver"} {
		if exists(p) {
			out = append(out, p)
		}
	}
	return out
}

// unseenRoots are where nothing of the host shows unless bound: the
// private roots and /dev (bubblewrap's own, with an empty /dev/shm).
func unseenRoots() []string { return append(privateRoots(), "/dev") }

func underAny(p string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return p == r || strings.HasPrefix(p, r+"/") })
}

// goModProxy is where the user's Go module downloads are shown inside,
// read-only: GOPROXY reads them first, so a private module cache fills
// without the network (go verifies each against go.sum).
const goModProxy = "/run/ralph-go-modules"

// mountsFor are the session's mounts for a command in dir, built once
// per folder.
func (ss *Session) mountsFor(dir string) []mount {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if m, ok := ss.mounts[dir]; ok {
		return m
	}
	m := ss.buildMounts(dir)
	ss.mounts[dir] = m
	return m
}

func (ss *Session) buildMounts(dir string) []mount {
	root := workRoot(dir)
	var mounts []mount
	add := func(kind, path, src string) { mounts = append(mounts, mount{kind: kind, path: path, src: src}) }
	rw := func(p string) { add("rw", expand(p), "") }
	ro := func(p string) { add("ro", expand(p), "") }
	for _, p := range privateRoots() {
		add("tmpfs", p, "")
	}
	private := unseenRoots()
	for _, p := range runKept() {
		ro(p)
	}
	if underAny(ss.home.real, private) {
		// The user's home is read-only beneath the private one, also
		// where it lives in a temp folder.
		ro(ss.home.real)
	}
	// With a checkout shown at the work tree's path, nothing of the real
	// work tree shows through it but its .git (read-only): a writable
	// path in it (the user's config may name the repository), ralph's
	// folder, a scratch bound into it are left out.
	inTree := func(p string) bool { return ss.use.Tree != "" && underAny(expand(p), []string{root}) }
	if ss.use.Tree != "" {
		add("rw", root, ss.use.Tree)
		add("ro", filepath.Join(root, ".git"), filepath.Join(root, ".git"))
	} else {
		rw(root)
		if dir != root && !strings.HasPrefix(dir, root+string(filepath.Separator)) {
			rw(dir)
		}
		grw, gro := gitPaths(root)
		for _, p := range grw {
			rw(p)
		}
		for _, p := range gro {
			ro(p)
		}
	}
	for _, p := range ss.sb.Protect {
		if !inTree(p) {
			ro(p)
		}
	}
	rw(ss.home.dir)
	mounts = append(mounts, ss.home.rw...)
	if m := goModDownloads(); m != "" {
		add("ro", goModProxy, m)
	}
	if c := userGoCache(); c != "" {
		add("ro", goUserCache, c)
	}
	for _, p := range ss.use.State {
		rw(p)
		if in, ok := ss.inHome(p); ok {
			add("rw", in, p)
		}
	}
	for _, p := range append(slices.Clone(ss.sb.Writable), ss.use.Writable...) {
		if !inTree(p) {
			rw(p)
		}
	}
	// The session's folder (its sockets) and ralph's binary (the init,
	// Go's GOCACHEPROG) are shown at their paths, also in a private /tmp.
	if len(ss.listen) > 0 {
		ro(ss.dir)
	}
	if underAny(ss.sb.helper, private) {
		ro(ss.sb.helper)
	}
	for inside, outside := range ss.use.Binds {
		if !inTree(inside) {
			add("rw", expand(inside), outside)
		}
	}
	for _, m := range ss.use.Mounts {
		kind := "ro"
		if m.Writable {
			kind = "rw"
		}
		add(kind, expand(m.Dst), expand(m.Src))
	}
	mounts = append(mounts, ss.settingsRO...)
	for _, p := range ss.use.ReadOnly {
		mounts = append(mounts, mount{kind: "ro", path: p, bulk: true})
	}
	hidden := slices.Clone(ss.sb.hidden)
	for _, a := range Adapters {
		if ss.use.Gate || a != ss.use.Agent {
			hidden = append(hidden, Credentials(a)...)
		}
	}
	for _, h := range hidden {
		if underAny(h, private) && !underAny(h, []string{ss.home.real}) {
			continue // the private /tmp or /run covers it already
		}
		// An empty read-only folder over a folder (one mount, where a
		// tmpfs made read-only is two), /dev/null over a file.
		switch st, err := os.Stat(h); {
		case err != nil:
		case st.IsDir():
			add("ro", h, ss.sb.empty)
		default:
			add("ro", h, "/dev/null")
		}
	}
	return mounts
}

// goModDownloads is the user's Go module download cache, when there is
// one.
func goModDownloads() string {
	mod := os.Getenv("GOMODCACHE")
	if mod == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			gopath = expand("~/go")
		}
		mod = filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "pkg", "mod")
	}
	d := filepath.Join(mod, "cache", "download")
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		return d
	}
	return ""
}

// fixedEnv is what every command of the session gets on top of the
// allowlisted environment.
func (ss *Session) fixedEnv() []string {
	env := []string{"TMPDIR=" + ss.tmp, "TMP=" + ss.tmp, "TEMP=" + ss.tmp, "RALPH_SANDBOX=bwrap", "HOME=" + ss.home.dir,
		// Go's caches are the home's own, whatever the user's are (those
		// are read through: GOCACHEPROG, GOPROXY below).
		"GOCACHE=" + filepath.Join(ss.home.dir, ".cache", "go-build"), "GOMODCACHE=" + filepath.Join(ss.home.dir, ".cache", "go-mod")}
	// An XDG folder the user set inside their home is the private home's
	// (tools write caches and state there); one elsewhere stays.
	for _, k := range []string{"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"} {
		if in, ok := ss.inHome(os.Getenv(k)); ok {
			env = append(env, k+"="+in)
		}
	}
	if goModDownloads() != "" {
		up := os.Getenv("GOPROXY")
		if up == "" {
			up = "https://proxy.golang.org,direct"
		}
		// Modules the user has are read from their download cache;
		// private ones too (GONOPROXY would send them past it).
		env = append(env, "GOPROXY=file://"+goModProxy+","+up, "GONOPROXY=ralph.invalid")
	}
	if userGoCache() != "" && os.Getenv("GOCACHEPROG") == "" {
		env = append(env, "GOCACHEPROG="+ss.sb.helper+" "+GoCacheArg+" "+goUserCache)
	}
	if ss.proxy != "" {
		u := "http://" + ss.proxy
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env = append(env, k+"="+u)
		}
	}
	return env
}

// MayWrite reports whether a confined process of this session could write
// path (for the native agent's file tools, which write from ralph's own
// process): the deepest mount at or above it decides.
func (ss *Session) MayWrite(path string) bool {
	path = expand(path)
	best, kind := -1, "ro"
	for _, m := range ss.mountsFor(ss.use.Dir) {
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
	mounts := ss.mountsFor(dir)
	if extra := argvFiles(c.Argv, dir, workRoot(dir)); len(extra) > 0 {
		mounts = append(slices.Clip(mounts), extra...)
	}
	base := c.Env
	if base == nil {
		base = os.Environ()
	}
	env := envFilter(base, !ss.use.Gate, ss.sb.Env)
	for _, kv := range append(slices.Clone(ss.env), ss.use.Env...) {
		k, v, _ := strings.Cut(kv, "=")
		env = envSet(env, k, v)
	}
	var bulk []string
	if n := countBulk(mounts); n > bulkInBwrap {
		// Thousands of read-only binds go in a list the init reads.
		var kept []mount
		for _, m := range mounts {
			if m.bulk {
				bulk = append(bulk, m.path)
			} else {
				kept = append(kept, m)
			}
		}
		// The list is in the session's folder, read-only inside: no
		// command of the session can change what the next one's init
		// binds.
		mounts = append(kept, mount{kind: "ro", path: ss.dir})
	}
	args := bwrapArgs(ss.network != NetHost, mounts, dir)
	init := slices.Clone(ss.listen)
	if len(bulk) > 0 {
		list, err := ss.bulkFile(dir, bulk)
		if err != nil {
			return c, nil, err
		}
		// The init binds them, then drops these before it starts the
		// command.
		args = append(args, "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP")
		init = append(init, "-r", list)
	}
	argv := append(append([]string{ss.sb.bwrap}, args...), "--")
	if len(init) > 0 {
		argv = append(argv, ss.sb.helper, InitArg)
		argv = append(argv, init...)
		argv = append(argv, "--")
	}
	c.Argv = append(argv, c.Argv...)
	c.Env = env
	return c, func() {}, nil
}

// bulkInBwrap is how many of Use.ReadOnly bubblewrap binds itself; more
// are bound by the sandbox's init, from a list: bubblewrap reads the
// whole mount table for each of its binds (seconds for a thousand), the
// init's mount(2) calls cost a fraction of that, but starting it costs a
// few milliseconds.
const bulkInBwrap = 32

func countBulk(mounts []mount) int {
	n := 0
	for _, m := range mounts {
		if m.bulk {
			n++
		}
	}
	return n
}

// bulkFile is the list of read-only paths the init binds (NUL
// separated), written once per folder in the session's folder.
func (ss *Session) bulkFile(dir string, paths []string) (string, error) {
	name := filepath.Join(ss.dir, "readonly-"+strconv.Itoa(len(dir))+"-"+escapePath(dir))
	if len(name) > 200 {
		name = name[:200]
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if exists(name) {
		return name, nil
	}
	return name, os.WriteFile(name, []byte(strings.Join(paths, "\x00")), 0o600)
}

// argvFiles are files a command names that live in a private temp folder
// of the sandbox (a script `sh /tmp/x/agent.sh` or `sh ../agent.sh`):
// shown read-only at their paths.
func argvFiles(argv []string, dir, root string) []mount {
	var out []mount
	private := unseenRoots()
	for _, a := range argv {
		if !strings.Contains(a, "/") || strings.ContainsAny(a, "\n ") {
			continue
		}
		p := a
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		p = filepath.Clean(p)
		if !underAny(p, private) || underAny(p, []string{root}) {
			continue // visible already; in the work tree, the tree's (or the checkout's)
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			out = append(out, mount{kind: "ro", path: p})
		}
	}
	return out
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

// deniedCounts is a copy of the session's denials so far.
func (ss *Session) deniedCounts() map[string]int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make(map[string]int, len(ss.denied))
	for h, n := range ss.denied {
		out[h] = n
	}
	return out
}

// deniedSince are the hosts denied since before (deniedCounts).
func (ss *Session) deniedSince(before map[string]int) []string {
	var out []string
	for h, n := range ss.deniedCounts() {
		if n > before[h] {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

// Home is the session's private HOME.
func (ss *Session) Home() string { return ss.home.dir }

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
	return fmt.Sprintf("sandboxed (bubblewrap): writes only to %s, git's folders, a private tmp and a private home (%s); %s", workRoot(ss.use.Dir), ss.home.dir, net)
}

// Close ends the session: the gateway stops, the private tmp goes, and
// the mount points it made.
func (ss *Session) Close() {
	if ss.gw != nil {
		ss.gw.close()
	}
	for _, p := range slices.Backward(ss.made) {
		removeEmpty(p)
	}
	os.RemoveAll(ss.dir)
}

// removeEmpty removes p and the empty folders under it; a file only when
// it is empty.
func removeEmpty(p string) {
	st, err := os.Lstat(p)
	if err != nil {
		return
	}
	if !st.IsDir() {
		if st.Size() == 0 {
			os.Remove(p)
		}
		return
	}
	entries, _ := os.ReadDir(p)
	for _, e := range entries {
		removeEmpty(filepath.Join(p, e.Name()))
	}
	os.Remove(p)
}
