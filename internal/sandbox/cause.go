package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// When a confined command fails, ralph reads its output for the failures
// the sandbox causes — a write refused (EROFS; EACCES outside the work
// tree) and a connection refused (by ralph's proxy, or a name that does
// not resolve in the sandbox's network) — and says so at the end of it,
// one line each, naming the path or host and the setting that allows it.

// NotePrefix starts every line ralph adds to a command's output to say
// the sandbox may be the cause of its failure.
const NotePrefix = "[ralph] the sandbox "

// CausedBy reports whether output holds a note that the sandbox refused
// the command something (NotePrefix).
func CausedBy(output string) bool { return strings.Contains(output, NotePrefix) }

// cause is one thing the sandbox refused a command.
type cause struct {
	path string // a write refused
	host string // a connection refused (host, or host:port)
}

var (
	absPath   = regexp.MustCompile(`(?:^|[^A-Za-z0-9._~/-])(/[A-Za-z0-9._@+~%/-]+)`)
	readOnly  = regexp.MustCompile(`(?i)read-only file system|EROFS`)
	noAccess  = regexp.MustCompile(`(?i)permission denied|EACCES|operation not permitted|EPERM`)
	writeVerb = regexp.MustCompile(`(?i)\b(open|mkdir|create|creat|write|rename|unlink|remove|touch|mkstemp|lock|chmod)\b`)
	hostNamed = []*regexp.Regexp{
		regexp.MustCompile(`getaddrinfo (?:ENOTFOUND|EAI_AGAIN) ([A-Za-z0-9.-]+)`),
		regexp.MustCompile(`Could not resolve host: ([A-Za-z0-9.-]+)`),
		regexp.MustCompile(`dial tcp: lookup ([A-Za-z0-9.-]+)`),
		regexp.MustCompile(`Failed to connect to ([A-Za-z0-9.-]+) port (\d+)`),
		regexp.MustCompile(`(?:ECONNREFUSED|ENETUNREACH) ([0-9a-fA-F.:\[\]]+:\d+)`),
		regexp.MustCompile(`dial tcp ([0-9a-fA-F.:\[\]]+:\d+): connect: (?:connection refused|network is unreachable)`),
		regexp.MustCompile(`host='([A-Za-z0-9.-]+)', port=(\d+)\).*(?:name resolution|Name or service not known|Failed to establish|Connection refused|Tunnel connection failed)`),
		regexp.MustCompile(`(?:request to|Request to|fetch) https?://([A-Za-z0-9.-]+)[^\s]* failed`),
		regexp.MustCompile(`ralph's sandbox does not allow ([A-Za-z0-9.:\[\]-]+)`),
	}
)

// causeScanner reads a command's output as it is written, line by line,
// for what the sandbox refused it; it passes the bytes on unchanged.
type causeScanner struct {
	tree string // writes here are the work tree's own business
	tmp  string

	mu      sync.Mutex
	partial []byte
	found   []cause
}

// maxCauses bounds what one command's output can note.
const maxCauses = 8

func (s *causeScanner) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(s.partial[:i])
		s.partial = s.partial[i+1:]
	}
	if len(s.partial) > 8<<10 {
		s.line(s.partial)
		s.partial = s.partial[:0]
	}
	return len(p), nil
}

func (s *causeScanner) line(b []byte) {
	if len(s.found) >= maxCauses || len(b) == 0 {
		return
	}
	if len(b) > 4<<10 {
		b = b[:4<<10]
	}
	line := string(b)
	if strings.Contains(line, NotePrefix) {
		return
	}
	ro := readOnly.MatchString(line)
	if ro || (noAccess.MatchString(line) && writeVerb.MatchString(line)) {
		for _, m := range absPath.FindAllStringSubmatchIndex(line, -1) {
			p := filepath.Clean(line[m[2]:m[3]])
			if m[2] == 0 && strings.HasPrefix(line[m[3]:], ":") {
				continue // the program that speaks ("/usr/bin/sh: 1: …")
			}
			if s.refusedWrite(p, ro) {
				s.add(cause{path: p})
				break
			}
		}
	}
	for _, re := range hostNamed {
		if m := re.FindStringSubmatch(line); m != nil {
			h := m[1]
			if len(m) > 2 && m[2] != "" {
				h += ":" + m[2]
			}
			s.add(cause{host: h})
		}
	}
}

// refusedWrite: a read-only path anywhere (the sandbox keeps parts of
// the tree read-only too), or one denied outside the work tree and the
// private tmp.
func (s *causeScanner) refusedWrite(p string, readOnly bool) bool {
	if p == "/" || strings.HasPrefix(p, "/proc/") || strings.HasPrefix(p, "/dev/") || strings.HasPrefix(p, "/sys/") {
		return false
	}
	if readOnly {
		return true
	}
	inside := func(root string) bool { return root != "" && (p == root || strings.HasPrefix(p, root+"/")) }
	return !inside(s.tmp) && !inside(s.tree)
}

func (s *causeScanner) add(c cause) {
	if !slices.Contains(s.found, c) {
		s.found = append(s.found, c)
	}
}

func (s *causeScanner) causes() []cause {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.line(s.partial)
		s.partial = nil
	}
	return slices.Clone(s.found)
}

// adviceFor renders the notes for what a command was refused: denied are
// the hosts ralph's proxy refused it; gate names the gate ("" for an
// agent).
func (s *Sandbox) adviceFor(found []cause, denied []string, gate, root string) []string {
	var out []string
	cfg := s.userConfig()
	seenHost := map[string]bool{}
	hostNote := func(h string, byProxy bool) {
		name, _, err := splitHostPort(h)
		if err != nil {
			name = h
		}
		if seenHost[name] {
			return
		}
		seenHost[name] = true
		how := "could not reach"
		if byProxy {
			how = "refused a connection to"
		}
		switch {
		case gate != "" && !byProxy && isLoopback(name):
			out = append(out, fmt.Sprintf("%s%s %s from gate %s: a gate has a network of its own; give it the host's with `gate_network: {%s: host}` under `sandbox:` in %s", NotePrefix, how, h, gate, gate, cfg))
		case gate != "" && !byProxy:
			out = append(out, fmt.Sprintf("%s%s %s from gate %s; allow it with `gate_hosts: {%s: [%s]}` (for tools that use $HTTPS_PROXY) or `gate_network: {%s: host}` under `sandbox:` in %s", NotePrefix, how, h, gate, gate, name, gate, cfg))
		case gate != "":
			out = append(out, fmt.Sprintf("%s%s %s from gate %s; allow it with `gate_hosts: {%s: [%s]}` under `sandbox:` in %s", NotePrefix, how, h, gate, gate, name, cfg))
		default:
			out = append(out, fmt.Sprintf("%s%s %s; allow it with `allow_hosts: [%s]` under `sandbox:` in %s", NotePrefix, how, h, name, cfg))
		}
	}
	for _, h := range denied {
		hostNote(h, true)
	}
	home, _ := os.UserHomeDir()
	for _, c := range found {
		switch {
		case c.host != "":
			hostNote(c.host, false)
		case protectedInTree(c.path, root, s.Protect):
			out = append(out, fmt.Sprintf("%skeeps %s read-only (ralph's own files and git's settings are never writable to an agent or a gate)", NotePrefix, c.path))
		case c.path == home || c.path == "/":
			out = append(out, fmt.Sprintf("%skeeps %s read-only; a tool should write under $HOME, the sandbox's private home, instead", NotePrefix, c.path))
		default:
			out = append(out, fmt.Sprintf("%skept %s from being written; allow it with `writable: [%s]` under `sandbox:` in %s", NotePrefix, c.path, c.path, cfg))
		}
	}
	return out
}

// protectedInTree: a path the sandbox keeps read-only inside the work
// tree (git's folder, ralph's state) — no setting opens it.
func protectedInTree(p, root string, protect []string) bool {
	for _, r := range append([]string{filepath.Join(root, ".git")}, protect...) {
		if r != "" && (p == r || strings.HasPrefix(p, r+"/")) {
			return true
		}
	}
	return false
}

func (s *Sandbox) userConfig() string {
	if s.UserConfig != "" {
		return s.UserConfig
	}
	return "your own config (~/.config/ralph/config.yaml)"
}

// Watch returns a writer that passes what an agent writes on to w and
// reads it for what the sandbox refused (Notes).
func (ss *Session) Watch(w io.Writer) io.Writer {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.scan == nil {
		ss.scan = &causeScanner{tree: workRoot(ss.use.Dir), tmp: ss.tmp}
	}
	if w == nil {
		return ss.scan
	}
	return io.MultiWriter(w, ss.scan)
}

// Notes are the lines (NotePrefix) that name what the sandbox refused
// the agent — a path it kept from being written, a name that did not
// resolve — and the setting that allows it; the hosts its proxy refused
// are in Denied.
func (ss *Session) Notes() []string {
	ss.mu.Lock()
	scan := ss.scan
	ss.mu.Unlock()
	if scan == nil {
		return nil
	}
	return ss.sb.adviceFor(scan.causes(), nil, "", scan.tree)
}
