package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

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
	homes  map[string]*home // seeded once per run: kind + repository
	hidden []string         // the deny list and the sockets the user's session names, expanded once
	empty  string           // an empty folder, shown over hidden ones
	gates  *gatePool
	saving bool // a save is due (saveSoon)
}

// Record is what a run's confinements were denied, kept in
// .ralph/sandbox.json for `ralph status` and the dashboard.
type Record struct {
	Engine    string    `json:"engine"`
	Started   time.Time `json:"started"`
	Confined  int       `json:"confined"` // agent runs and gate commands confined so far
	Denied    []Denial  `json:"denied,omitempty"`
	Tampered  []Tamper  `json:"tampered,omitempty"`
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

// Tamper is an agent CLI setting an agent changed, which ralph put back.
type Tamper struct {
	Path string    `json:"path"`
	By   string    `json:"by"`
	What string    `json:"what"` // "changed", "created", "removed", "mcpServers changed"
	When time.Time `json:"when"`
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
	pruneHomes(HomesDir())
	s := &Sandbox{Policy: p, bwrap: bw, helper: helperPath(), homes: map[string]*home{}, gates: &gatePool{open: map[string]*pooled{}}}
	s.hidden = hiddenPaths(p.Hidden)
	// An empty folder to show over a hidden one.
	s.empty = filepath.Join(HomesDir(), ".empty")
	if err := os.MkdirAll(HomesDir(), 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := os.Mkdir(s.empty, 0o555); err != nil && !os.IsExist(err) {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s.record = Record{Engine: "bwrap", Started: time.Now().UTC(), AgentNet: p.AgentNetwork, Allowed: newAllowlist(p.AllowHosts).list()}
	for _, w := range p.Writable {
		s.record.Writable = append(s.record.Writable, expand(w))
	}
	s.record.Hidden = s.hidden
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

// saveSoon saves the record within a second (a count changed: one
// write per second at most, not one per gate command). Called with mu
// held.
func (s *Sandbox) saveSoon() {
	if s.saving {
		return
	}
	s.saving = true
	time.AfterFunc(time.Second, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.saving = false
		s.saveLocked()
	})
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

// Summary is the record in one line, for `ralph status` and the
// dashboard: that the run's agents and gates ran sandboxed, and which
// hosts they were denied.
func (r *Record) Summary() string {
	if r == nil {
		return ""
	}
	s := fmt.Sprintf("on (bubblewrap): %d confined, agents' network %s, gates' none unless set", r.Confined, r.AgentNet)
	for _, t := range r.Tampered {
		s += fmt.Sprintf("; TAMPERED: %s %s %s (put back)", t.By, t.What, t.Path)
	}
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
	fmt.Fprintf(&b, "bubblewrap (%s) starts here. Writable: the work tree, git's objects, refs, index and logs, a private /tmp, a private HOME per repository (agents' and gates' apart, under %s) with the caches in it", s.bwrap, HomesDir())
	if len(s.record.Writable) > 0 {
		fmt.Fprintf(&b, ", %s", strings.Join(s.record.Writable, ", "))
	}
	b.WriteString(", the agent CLI's own state. Read-only: everything else, your home, ralph's state folder, .git/config, hooks, info, objects/info and packed-refs, the agent CLI's settings. ")
	fmt.Fprintf(&b, "Hidden: %s, and your session's /tmp, /run and sockets. ", strings.Join(s.record.Hidden, ", "))
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
