package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/store"
)

// Progress memory (compression). progress.md is one section of
// "Codebase patterns" at the top, then the iterations' entries, appended.
// A prompt gets the patterns and the newest entries within a window; when
// the entries outgrow the window by half again, the older ones are
// summarised by one agent call into the patterns section and moved, raw,
// to progress-archive.md. Nothing an agent reported leaves the disk, and
// every prompt stays within the budget however long the run.

// defaultProgressBudget is the progress digest's budget in tokens.
const defaultProgressBudget = 2000

const (
	patternsHeading = "## Codebase patterns"
	patternsEnd     = "<!-- ralph: end of the codebase patterns; the entries summarised in them are in progress-archive.md -->"
)

// memory is the progress file's budget: the patterns section's cap and
// the window of newest entries a prompt carries (bytes; a token is about
// four).
type memory struct {
	patternsMax int
	window      int
	// mu serialises writers of the progress file (appends and the
	// compaction's rewrite); compacting lets one compaction run at a time.
	mu         sync.Mutex
	compacting sync.Mutex
	// failedAt is the size of the entries when a compaction last failed:
	// the next try waits for another half window.
	failedAt int64
}

func newMemory(budgetTokens int) *memory {
	b := budgetTokens * 4
	return &memory{patternsMax: b / 4, window: b - b/4}
}

// progressParts is the progress file split: the patterns section (without
// its heading and end marker) and where the entries start.
type progressParts struct {
	patterns string
	entries  int64 // offset of the first entry byte
	size     int64
}

// readParts reads the head of the file (the patterns section is capped, so
// this does not grow with the file) and its size.
func readParts(f *os.File, patternsMax int) (progressParts, error) {
	st, err := f.Stat()
	if err != nil {
		return progressParts{}, err
	}
	p := progressParts{size: st.Size()}
	head := make([]byte, min(st.Size(), int64(patternsMax)*2+4096))
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return p, err
	}
	if !bytes.HasPrefix(head, []byte(patternsHeading+"\n")) {
		return p, nil
	}
	end := bytes.Index(head, []byte(patternsEnd))
	if end < 0 {
		return p, nil // a section ralph did not write: part of the entries
	}
	p.patterns = strings.TrimSpace(string(head[len(patternsHeading)+1 : end]))
	p.entries = int64(end + len(patternsEnd))
	return p, nil
}

// digest is what a prompt carries of a progress file: its codebase
// patterns, then its newest entries within the window, cut at an entry
// boundary. It reads the head and the tail only.
func (m *memory) digest(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	p, err := readParts(f, m.patternsMax)
	if err != nil {
		return ""
	}
	off := max(p.size-int64(m.window), p.entries)
	buf := make([]byte, p.size-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	tail := string(buf)
	if off > p.entries {
		if i := strings.Index(tail, "\n## "); i >= 0 {
			tail = tail[i+1:]
		}
	}
	tail = strings.TrimSpace(tail)
	if p.patterns == "" {
		return tail
	}
	return patternsHeading + " (summarised from earlier entries)\n\n" + p.patterns + "\n\n" + tail
}

// repoPatternsHeading heads the patterns section of a progress file the
// agents keep in the repository (the bash Ralph's progress.txt).
const repoPatternsHeading = "## Codebase Patterns"

// digestRepo is what a prompt carries of a progress file the agents keep
// (`progress: repo`): its Codebase Patterns section (any case, up to the
// next heading, within the patterns' share) and its newest entries within
// the window.
func (m *memory) digestRepo(path string) string {
	// The agents write it: read bounded (a larger file's start is read).
	b, err := store.ReadFileLimit(path, 8<<20)
	if err != nil && !errors.Is(err, store.ErrTooLarge) {
		return ""
	}
	text := string(b)
	patterns := ""
	if i := strings.Index(strings.ToLower(text), strings.ToLower(repoPatternsHeading)+"\n"); i >= 0 {
		body := text[i+len(repoPatternsHeading)+1:]
		end := len(body)
		if j := strings.Index(body, "\n## "); j >= 0 {
			end = j
		}
		patterns = strings.TrimSpace(body[:end])
		if len(patterns) > m.patternsMax {
			patterns = patterns[:m.patternsMax] + " …"
		}
		text = text[:i] + body[end:]
	}
	tail := strings.TrimSpace(text)
	if len(tail) > m.window {
		tail = tail[len(tail)-m.window:]
		if i := strings.Index(tail, "\n## "); i >= 0 {
			tail = tail[i+1:]
		}
	}
	if patterns == "" {
		return tail
	}
	return strings.TrimSpace(repoPatternsHeading + "\n\n" + patterns + "\n\n" + tail)
}

// maskRepoProgress masks the secrets in the progress file the agents
// keep in the repository (`progress: repo`) of the work tree dir, before
// ralph commits it with the item's work: a masked secret never lands on
// a branch that --pr pushes.
func (e *Engine) maskRepoProgress(dir, item string) {
	rel := e.cfg.Progress.InRepo
	if rel == "" || dir == "" {
		return
	}
	p := filepath.Join(dir, rel)
	b, err := store.ReadFileLimit(p, 16<<20)
	if err != nil {
		return
	}
	if masked := e.mask.String(string(b)); masked != string(b) {
		if store.WriteFile(p, []byte(masked), 0o644) == nil {
			e.emit(Event{Type: "secret_masked", Item: item, Message: "a secret in " + rel + " was masked before ralph committed it"})
		}
	}
}

// logProgress appends an entry to the progress file.
func (e *Engine) logProgress(b []byte) {
	e.mem.mu.Lock()
	defer e.mem.mu.Unlock()
	// Masked here, where every entry passes: file names and role
	// findings are the agent's words too.
	_ = store.AppendLog(e.cfg.Paths.Progress, []byte(e.mask.String(string(b))))
}

// compactProgress summarises the older entries when the entries outgrew
// the window by half again: the summariser's answer becomes the patterns
// section, the summarised entries go to progress-archive.md. The agent
// runs without the file's lock (appends go on); the rewrite then checks
// that the summarised part is still as it was. A failure leaves the file
// as it was: the prompt stays bounded by the window either way.
func (e *Engine) compactProgress(ctx context.Context) {
	m := e.mem
	if e.cfg.Progress.Summarizer == nil || !m.compacting.TryLock() {
		return
	}
	defer m.compacting.Unlock()
	path := e.cfg.Paths.Progress
	old, parts, cut, ok := m.olderEntries(path)
	if !ok {
		return
	}
	start := time.Now()
	summary, err := e.summarize(ctx, parts.patterns, old)
	if err != nil {
		m.failedAt = parts.size - parts.entries
		e.emit(Event{Type: "progress_compaction_failed", Message: "summarising the older progress entries failed (they stay in the file; the prompt keeps the newest): " + err.Error()})
		return
	}
	m.failedAt = 0
	if len(summary) > m.patternsMax {
		summary = cutAtLine(summary, m.patternsMax) + "\n(cut to the budget; every entry is in progress-archive.md)"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < cut || !bytes.Equal(b[parts.entries:cut], []byte(old)) {
		e.emit(Event{Type: "progress_compaction_failed", Message: "progress.md changed under the compaction; it is tried again later"})
		return
	}
	if err := archiveEntries(archivePath(path), old); err != nil {
		e.emit(Event{Type: "progress_compaction_failed", Message: "writing progress-archive.md: " + err.Error()})
		return
	}
	var nb bytes.Buffer
	fmt.Fprintf(&nb, "%s\n\n%s\n\n%s", patternsHeading, strings.TrimSpace(summary), patternsEnd)
	nb.Write(b[cut:])
	if err := store.WriteFile(path, nb.Bytes(), 0o644); err != nil {
		e.emit(Event{Type: "progress_compaction_failed", Message: "rewriting progress.md: " + err.Error()})
		return
	}
	e.emit(Event{Type: "progress_compacted", Message: fmt.Sprintf("summarised %d bytes of older progress entries into the codebase patterns (%d bytes) in %s; the entries are in %s",
		len(old), len(summary), time.Since(start).Round(time.Millisecond), relTo(e.cfg.Paths.Root, archivePath(path)))})
}

// olderEntries is the part of the entries older than the window, when the
// entries have outgrown the window by half again (and, after a failure,
// by another half since).
func (m *memory) olderEntries(path string) (old string, p progressParts, cut int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", p, 0, false
	}
	defer f.Close()
	if p, err = readParts(f, m.patternsMax); err != nil {
		return "", p, 0, false
	}
	n := p.size - p.entries
	if n <= int64(m.window)+int64(m.window)/2 || m.failedAt > 0 && n < m.failedAt+int64(m.window)/2 {
		return "", p, 0, false
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, p.entries); err != nil && !errors.Is(err, io.EOF) {
		return "", p, 0, false
	}
	// Keep the newest entries within the window; the older ones go.
	keep := bytes.Index(buf[len(buf)-m.window:], []byte("\n## "))
	if keep < 0 {
		return "", p, 0, false
	}
	cut = p.entries + int64(len(buf)-m.window+keep)
	return string(buf[:cut-p.entries]), p, cut, true
}

func archivePath(progress string) string {
	return filepath.Join(filepath.Dir(progress), strings.TrimSuffix(filepath.Base(progress), ".md")+"-archive.md")
}

// archiveEntries appends entries to the archive with a marker naming their
// hash, once: a crash after the append and before the rewrite archives the
// same entries again at the next compaction, which finds the marker.
func archiveEntries(path, entries string) error {
	sum := sha256.Sum256([]byte(entries))
	marker := "<!-- ralph: archived " + hex.EncodeToString(sum[:8]) + " -->"
	if f, err := os.Open(path); err == nil {
		st, _ := f.Stat()
		n := min(st.Size(), int64(len(entries)+len(marker)+64))
		tail := make([]byte, n)
		_, _ = f.ReadAt(tail, st.Size()-n)
		f.Close()
		if bytes.Contains(tail, []byte(marker)) {
			return nil
		}
	}
	return store.AppendLine(path, []byte("\n"+marker+"\n"+strings.Trim(entries, "\n")))
}

// summarize asks the summariser to fold entries into the patterns.
func (e *Engine) summarize(ctx context.Context, patterns, entries string) (string, error) {
	cfg := &e.cfg
	prompt := fmt.Sprintf(`# Summarise a Ralph loop's progress notes

You keep the "Codebase patterns" section at the top of a Ralph loop's
progress notes: what every later iteration must know about this codebase —
conventions, commands, gotchas, decisions, what each finished item
established, and every learning an agent reported. Merge the older entries
below into the section. Keep every learning that still holds (shorten,
group, drop duplicates); drop what later entries superseded. At most %d
bytes. Change no file. Answer with the section's text only: no heading,
no preamble.

## The section so far

%s

## Older entries to fold in

%s
`, e.mem.patternsMax, orNone(patterns), strings.TrimSpace(entries))
	dir := filepath.Join(cfg.Paths.Dir, "summaries")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	base := filepath.Join(dir, e.cfg.Clock.Now().UTC().Format("20060102-150405.000"))
	pf := base + ".prompt.md"
	if err := store.WriteFile(pf, []byte(prompt), 0o644); err != nil {
		return "", err
	}
	tr, err := store.OpenOwn(base+".log", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	defer tr.Close()
	// The summariser needs only its prompt: it runs in an empty folder
	// of its own, where a coding agent that writes files anyway touches
	// nothing of the repository's.
	work, err := os.MkdirTemp("", "ralph-summarizer-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	res, err := cfg.Progress.Summarizer.Run(ctx, agent.Request{Prompt: prompt, PromptFile: pf, Dir: work, Model: cfg.Progress.SummarizerModel,
		Env:     append(append([]string{}, cfg.Agent.Env...), "RALPH_PROMPT_FILE="+pf, "RALPH_ROLE=summarizer", "RALPH_RUN_ID="+e.runID()),
		Timeout: cfg.Limits.IterationTimeout, Transcript: tr, ItemID: "progress", Role: "summarizer"})
	if err != nil {
		return "", err
	}
	_ = e.box.update(func(st *State) { st.Usage.Add(res.Usage) })
	switch {
	case res.RateLimit != nil:
		return "", fmt.Errorf("rate limited: %s", res.RateLimit.Message)
	case res.Failed():
		return "", fmt.Errorf("the summariser (%s) failed: %s (transcript %s.log)", cfg.Progress.Summarizer.Name(), strings.TrimRight(res.ErrorText, ": \n"), base)
	}
	s := strings.TrimSpace(res.FinalText)
	s = strings.TrimSpace(strings.TrimPrefix(s, patternsHeading))
	if s == "" {
		return "", fmt.Errorf("the summariser (%s) answered nothing (transcript %s.log)", cfg.Progress.Summarizer.Name(), base)
	}
	return s, nil
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(none yet)"
	}
	return s
}

// cutAtLine cuts s to at most n bytes at a line end.
func cutAtLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	if i := strings.LastIndexByte(s, '\n'); i > 0 {
		s = s[:i]
	}
	return s
}
