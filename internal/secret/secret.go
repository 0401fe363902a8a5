// Package secret masks secrets in what ralph writes down: commit messages,
// progress, state, events, status output and transcripts. A secret is the
// value of an environment variable whose name says it is one (KEY, TOKEN,
// SECRET, PASSWORD) or text shaped like a well-known API key.
package secret

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// mask is what a secret is replaced with.
const mask = "[masked]"

// minValue is the shortest environment value treated as a secret: shorter
// ones ("1", "true") would mask ordinary words.
const minValue = 8

// shapes are well-known key formats: Anthropic, OpenAI, GitHub (classic
// and fine-grained), AWS access key ids, Google API keys, Slack tokens.
var shapes = regexp.MustCompile(`sk-ant-[A-Za-z0-9_\-]{20,}|sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35}|xox[abpr]-[A-Za-z0-9\-]{10,}`)

// shapePrefixes are literal starts of every shape: text holding none of
// them cannot match, and most output holds none, so the regular
// expression (the costliest step of writing a transcript) is skipped.
var shapePrefixes = []string{"sk-", "gho_", "ghp_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "AIza", "xoxa-", "xoxb-", "xoxp-", "xoxr-"}

func mayHaveShape(s string) bool {
	return slices.ContainsFunc(shapePrefixes, func(p string) bool { return strings.Contains(s, p) })
}

// mayHaveShapeIn is mayHaveShape of a stream's buffer, read in place.
func mayHaveShapeIn(b []byte) bool {
	return slices.ContainsFunc(shapePrefixes, func(p string) bool { return bytes.Contains(b, []byte(p)) })
}

// shapeMax bounds how long a shaped key can be for streaming: a key
// longer than this is still masked in full when it arrives whole.
const shapeMax = 256

// Masker masks secrets. The zero value and nil mask key shapes only.
type Masker struct {
	values []string          // longest first
	names  map[string]string // each value's variable
	off    bool
}

// Names say a variable holds a secret.
var names = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"}

// FromEnv masks the secret values of env (KEY=VALUE entries) and of this
// process's environment.
func FromEnv(env ...string) *Masker {
	m := &Masker{names: map[string]string{}}
	seen := map[string]bool{}
	for _, kv := range append(os.Environ(), env...) {
		k, v, _ := strings.Cut(kv, "=")
		up := strings.ToUpper(k)
		if len(v) < minValue || seen[v] {
			continue
		}
		for _, n := range names {
			if strings.Contains(up, n) {
				seen[v] = true
				m.values = append(m.values, v)
				m.names[v] = k
				break
			}
		}
	}
	slices.SortFunc(m.values, func(a, b string) int { return len(b) - len(a) })
	return m
}

// shapeKinds name a key shape by its start, for Find.
var shapeKinds = []struct{ prefix, kind string }{
	{"sk-ant-", "an Anthropic API key"}, {"sk-", "an OpenAI API key"}, {"github_pat_", "a GitHub token"},
	{"gh", "a GitHub token"}, {"AKIA", "an AWS access key id"}, {"ASIA", "an AWS access key id"},
	{"AIza", "a Google API key"}, {"xox", "a Slack token"},
}

// Find names the secrets b holds — "the value of $NAME" for a variable's
// value, "an Anthropic API key" for a key's shape — without the secrets
// themselves; nil when it holds none (or masking is off). The judge
// refuses a staged file that holds one (ralph would commit it in clear).
func (m *Masker) Find(b []byte) []string {
	if m != nil && m.off {
		return nil
	}
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if m != nil {
		for _, v := range m.values {
			if bytes.Contains(b, []byte(v)) {
				add("the value of $" + m.names[v])
			}
		}
	}
	if mayHaveShapeIn(b) {
		for _, loc := range shapes.FindAllIndex(b, -1) {
			for _, k := range shapeKinds {
				if bytes.HasPrefix(b[loc[0]:loc[1]], []byte(k.prefix)) {
					add(k.kind)
					break
				}
			}
		}
	}
	return out
}

// Off returns a masker that leaves everything as it is (--no-mask).
func Off() *Masker { return &Masker{off: true} }

// String masks s.
func (m *Masker) String(s string) string {
	if m != nil && m.off {
		return s
	}
	if m != nil {
		for _, v := range m.values {
			if strings.Contains(s, v) {
				s = strings.ReplaceAll(s, v, mask)
			}
		}
	}
	if !mayHaveShape(s) {
		return s
	}
	return shapes.ReplaceAllString(s, mask)
}

// Strings masks each of ss in place and returns it.
func (m *Masker) Strings(ss []string) []string {
	for i := range ss {
		ss[i] = m.String(ss[i])
	}
	return ss
}

// Writer masks a stream: it holds back the last bytes of what it was given
// (no more than the longest secret could need) until more arrives or
// Close, so a secret split across two writes is still masked.
func (m *Masker) Writer(w io.Writer) io.WriteCloser {
	if m != nil && m.off {
		return nopCloser{w}
	}
	wr := &writer{m: m, w: w, hold: shapeMax}
	if m != nil {
		for _, v := range m.values {
			wr.values = append(wr.values, []byte(v))
			wr.hold = max(wr.hold, len(v))
			wr.multiline = wr.multiline || strings.ContainsAny(v, "\r\n")
		}
	}
	return wr
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

type writer struct {
	m      *Masker
	w      io.Writer
	values [][]byte // m's values, to find in the buffer in place
	hold   int
	// multiline says a secret value spans lines (a PEM key): then nothing
	// may be written up to a line end before the hold.
	multiline bool

	mu      sync.Mutex // the agent's output and the flush timer both write
	buf     []byte
	flushed time.Time
	timer   *time.Timer // flushes complete lines a slow writer left waiting
	err     error
}

// batch is how much output the writer gathers before masking and writing
// it, unless flushEvery has passed since its last write: many small
// writes (an agent's lines) cost one pass and one write(2), and a slow
// agent's transcript still follows it closely — a line it printed is
// written within flushEvery even if nothing follows it (a live view
// reads the transcript).
const (
	batch      = 64 << 10
	flushEvery = 100 * time.Millisecond
)

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) < batch && time.Since(w.flushed) < flushEvery {
		if w.timer == nil {
			w.timer = time.AfterFunc(flushEvery, w.tick)
		}
		return len(p), nil
	}
	if err := w.flush(); err != nil {
		w.err = err
		return 0, err
	}
	return len(p), nil
}

func (w *writer) tick() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = nil
	if w.err == nil && w.buf != nil {
		w.err = w.flush()
	}
}

// flush writes what is safe: all but the last hold bytes, or up to the
// last line end when that is further (no secret spans lines unless one
// of the values does). The held bytes may be the start of a secret that
// has not all arrived; a secret that starts before the cut has arrived
// whole and is masked in one piece. Called with mu held.
func (w *writer) flush() error {
	w.flushed = time.Now()
	cut := len(w.buf) - w.hold
	if !w.multiline {
		if nl := bytes.LastIndexByte(w.buf, '\n'); nl+1 > cut {
			cut = nl + 1
		}
	}
	if cut <= 0 {
		return nil
	}
	cut, found := w.safeCut(cut)
	var err error
	if found {
		_, err = io.WriteString(w.w, w.m.String(string(w.buf[:cut])))
	} else {
		// Nothing to mask: the bytes as they are, not copied (a copy of
		// every 64 KiB was a third of the garbage of an agent printing
		// 100 MB).
		_, err = w.w.Write(w.buf[:cut])
	}
	if err != nil {
		return err
	}
	w.buf = w.buf[:copy(w.buf, w.buf[cut:])]
	return nil
}

// safeCut moves cut to the end of any secret that starts before it in the
// buffer; found says there is one (the text up to cut holds a secret only
// if one starts before cut).
func (w *writer) safeCut(cut int) (end int, found bool) {
	end = cut
	for _, v := range w.values {
		for i := 0; ; {
			j := bytes.Index(w.buf[i:], v)
			if j < 0 || i+j >= cut {
				break
			}
			end, found = max(end, i+j+len(v)), true
			i += j + 1
		}
	}
	if !mayHaveShapeIn(w.buf) {
		return end, found
	}
	for _, loc := range shapes.FindAllIndex(w.buf, -1) {
		if loc[0] < cut {
			end, found = max(end, loc[1]), true
		}
	}
	return end, found
}

// Close writes what is held back.
func (w *writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	out := w.m.String(string(w.buf))
	w.buf = nil
	if w.err != nil {
		return w.err
	}
	_, err := io.WriteString(w.w, out)
	return err
}
