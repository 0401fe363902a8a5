package sandbox

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

// GateView is what the gates of one judging see besides the defaults:
// the checkout of the judged commit at the work tree's path, the files
// kept read-only, more folders shown (dependency folders' snapshots) and
// more variables. Its fields are Use's (Tree, ReadOnly, Mounts, Env).
//
// The judge puts it on the context the gates run with:
//
//	ctx = sandbox.WithGateView(ctx, sandbox.GateView{Tree: checkout, Mounts: deps})
//	results, ok := gates.Run(ctx, workTree, list, log) // Dir stays the work tree
//
// Every gate command run with that context (through Sandbox.Gates)
// shares one confinement: the bind list is built once, and the checkout
// is shown at the work tree's path (Dir's top), not at its own.
type GateView struct {
	Tree     string
	ReadOnly []string
	Mounts   []Mount
	Env      []string
}

type gateViewKey struct{}

// WithGateView returns ctx whose gates (Sandbox.Gates) see v.
func WithGateView(ctx context.Context, v GateView) context.Context {
	return context.WithValue(ctx, gateViewKey{}, &v)
}

// GateViewOf is the view ctx carries, or nil.
func GateViewOf(ctx context.Context) *GateView {
	v, _ := ctx.Value(gateViewKey{}).(*GateView)
	return v
}

// Gates returns a proc.Runner that confines every command it runs as a
// gate: the repository's gate home, no network unless the gate's is set
// (GateNetwork, GateHosts, by the gate's name in $RALPH_GATE), and the
// GateView of its context. A command that fails ends with the notes of
// what the sandbox refused it (NotePrefix).
func (s *Sandbox) Gates(inner proc.Runner) proc.Runner {
	return gateRunner{s: s, inner: inner}
}

type gateRunner struct {
	s     *Sandbox
	inner proc.Runner
}

// GateEnv names the variable that carries a gate's name to its command.
const GateEnv = "RALPH_GATE"

// gateNetwork is a gate's network and hosts by its name.
func (s *Sandbox) gateNetwork(name string) (string, []string) {
	network := s.GateNetwork[name]
	if network == "" {
		network = s.GateNetwork["*"]
	}
	hosts := append(slices.Clone(s.GateHosts[name]), s.GateHosts["*"]...)
	if len(hosts) > 0 && (network == "" || network == NetNone) {
		network = NetProxy
	}
	if network == NetProxy {
		hosts = append(hosts, s.AllowHosts...)
	}
	return network, hosts
}

func (g gateRunner) Run(ctx context.Context, c proc.Cmd) (proc.Result, error) {
	name := ""
	for _, kv := range c.Env {
		if v, ok := strings.CutPrefix(kv, GateEnv+"="); ok {
			name = v
		}
	}
	network, hosts := g.s.gateNetwork(name)
	u := Use{Label: "gates", Dir: c.Dir, Network: network, Hosts: hosts, Gate: true}
	view := GateViewOf(ctx)
	if view != nil {
		u.Tree, u.ReadOnly, u.Mounts, u.Env = view.Tree, view.ReadOnly, view.Mounts, view.Env
	}
	ss, release, err := g.s.gates.get(fmt.Sprintf("%s\x00%s\x00%s\x00%p", workRoot(expand(c.Dir)), network, strings.Join(hosts, ","), view), func() (*Session, error) {
		return g.s.Open(u)
	})
	if err != nil {
		return proc.Result{ExitCode: -1}, err
	}
	defer release()
	label := "gate"
	if name != "" {
		label += " " + name
	}
	ss.setLabel(label)
	g.s.count()
	before := ss.deniedCounts()
	scan := &causeScanner{tree: workRoot(expand(c.Dir)), tmp: ss.tmp}
	out := c.Stdout
	if out == nil {
		out = c.Stderr
	}
	// One writer for both, when they are one: os/exec then writes from
	// one goroutine at a time, as the caller expects.
	same := c.Stdout != nil && proc.SameWriter(c.Stdout, c.Stderr)
	if c.Stdout != nil {
		c.Stdout = io.MultiWriter(c.Stdout, scan)
	}
	if same {
		c.Stderr = c.Stdout
	} else if c.Stderr != nil {
		c.Stderr = io.MultiWriter(c.Stderr, scan)
	}
	res, err := g.inner.Run(proc.WithConfiner(ctx, ss), c)
	if (err != nil || res.ExitCode != 0 || res.TimedOut) && out != nil {
		for _, note := range g.s.adviceFor(scan.causes(), ss.deniedSince(before), nonEmpty(name, "*"), scan.tree) {
			fmt.Fprintln(out, "\n"+note)
		}
	}
	return res, err
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (ss *Session) setLabel(l string) {
	ss.mu.Lock()
	ss.label = l
	ss.mu.Unlock()
}

// gatePool keeps a gates' confinement open while its gates run one after
// another (an iteration's gates share one), and closes it once idle.
type gatePool struct {
	mu   sync.Mutex
	open map[string]*pooled
}

type pooled struct {
	ss    *Session
	users int
	idle  *time.Timer
}

// gateIdle is how long an unused gates' confinement stays open.
const gateIdle = 2 * time.Second

func (p *gatePool) get(key string, open func() (*Session, error)) (*Session, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.open[key]
	if e == nil {
		ss, err := open()
		if err != nil {
			return nil, nil, err
		}
		e = &pooled{ss: ss}
		p.open[key] = e
	}
	if e.idle != nil {
		e.idle.Stop()
		e.idle = nil
	}
	e.users++
	return e.ss, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		e.users--
		if e.users > 0 {
			return
		}
		e.idle = time.AfterFunc(gateIdle, func() {
			p.mu.Lock()
			if e.users > 0 || p.open[key] != e {
				p.mu.Unlock()
				return
			}
			delete(p.open, key)
			p.mu.Unlock()
			e.ss.Close()
		})
	}, nil
}

// CloseGates ends the gates' confinements still open (at the end of a
// run; an idle one ends on its own).
func (s *Sandbox) CloseGates() {
	p := s.gates
	p.mu.Lock()
	var all []*pooled
	for _, k := range slices.Sorted(maps.Keys(p.open)) {
		e := p.open[k]
		if e.users == 0 {
			if e.idle != nil {
				e.idle.Stop()
			}
			delete(p.open, k)
			all = append(all, e)
		}
	}
	p.mu.Unlock()
	for _, e := range all {
		e.ss.Close()
	}
}

func splitHostPort(h string) (string, string, error) { return net.SplitHostPort(h) }

func isLoopback(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}
