package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/proc"
)

// StreamParser consumes an agent's stdout one line at a time (so a 100 MB
// transcript is never held in memory) and builds the Result.
type StreamParser interface {
	Line(line []byte)
	// Finish fills res (exit code, duration, timeout are already set).
	Finish(res *Result, stderrTail string)
}

// runCLI runs inv through r: files written, prompt on stdin (or nothing:
// stdin is always closed so a CLI never waits for a person), stdout and
// stderr streamed to the transcript, stdout fed to p line by line.
func runCLI(ctx context.Context, r proc.Runner, inv Invocation, req Request, p StreamParser) (Result, error) {
	for path, content := range inv.Files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return Result{}, err
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return Result{}, err
		}
	}
	transcript := req.Transcript
	if transcript == nil {
		transcript = io.Discard
	}
	var stdin io.Reader = strings.NewReader("")
	if inv.PromptStdin {
		stdin = strings.NewReader(req.Prompt)
	}
	tail := &TailBuffer{Max: 8 << 10}
	lw := &lockedWriter{w: transcript}
	out := &lineStream{lw: lw, p: p}
	res, err := r.Run(ctx, proc.Cmd{
		Argv:    inv.Argv,
		Dir:     req.Dir,
		Env:     proc.Environ(nil, append(append([]string{}, inv.Env...), req.Env...)...),
		Stdin:   stdin,
		Stdout:  out,
		Stderr:  io.MultiWriter(lw, tail),
		Timeout: req.Timeout,
		Started: req.Started,
	})
	out.finish()
	result := Result{ExitCode: res.ExitCode, TimedOut: res.TimedOut, Duration: res.Duration}
	if errors.Is(err, proc.ErrNotFound) {
		return result, err
	}
	p.Finish(&result, tail.String())
	if result.TimedOut && result.ErrorText == "" {
		result.ErrorText = fmt.Sprintf("timed out after %s", req.Timeout)
	}
	return result, err
}

// maxParsedLine bounds the line the parser is given: a longer one (no
// format puts its final answer in a line this size) still goes to the
// transcript whole, but is not parsed, and is never held in memory.
const maxParsedLine = 256 << 10

// lineStream is the agent's stdout: every chunk the process wrote goes to
// the transcript in one write (whole lines only, so stderr never lands
// inside a line), and each line to the parser, split where it stands in
// the chunk — no copy and no shift of a buffer per line, so output is
// consumed at the speed it is written. Only a line cut by a chunk's end
// is carried over (bounded by maxParsedLine).
type lineStream struct {
	lw      *lockedWriter
	p       StreamParser
	partial []byte // the start of a line a chunk cut off
	huge    bool   // the current line outgrew maxParsedLine: written, not parsed
}

func (s *lineStream) Write(b []byte) (int, error) {
	n := len(b)
	last := bytes.LastIndexByte(b, '\n')
	if last < 0 {
		s.carry(b)
		return n, nil
	}
	whole := b[:last+1]
	if len(s.partial) > 0 {
		_, _ = s.lw.writeAll(s.partial, whole)
	} else {
		_, _ = s.lw.Write(whole)
	}
	for len(whole) > 0 {
		i := bytes.IndexByte(whole, '\n')
		line := whole[:i]
		whole = whole[i+1:]
		switch {
		case s.huge:
			s.huge = false
		case len(s.partial) > 0:
			s.partial = append(s.partial, line...)
			if len(s.partial) <= maxParsedLine {
				s.p.Line(trimEOL(s.partial))
			}
		default:
			if len(line) <= maxParsedLine {
				s.p.Line(trimEOL(line))
			}
		}
		s.partial = s.partial[:0]
	}
	s.carry(b[last+1:])
	return n, nil
}

// ReadFrom reads the process's output in larger pieces than io.Copy's
// 32 KiB (os/exec copies through it): fewer reads, transcript writes and
// parser wake-ups per megabyte.
func (s *lineStream) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			total += int64(n)
			_, _ = s.Write(buf[:n])
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// carry keeps the start of a line until its end arrives; a line that
// outgrows maxParsedLine goes to the transcript as it comes.
func (s *lineStream) carry(b []byte) {
	if len(b) == 0 {
		return
	}
	if s.huge || len(s.partial)+len(b) > maxParsedLine {
		if len(s.partial) > 0 {
			_, _ = s.lw.writeAll(s.partial, b)
		} else {
			_, _ = s.lw.Write(b)
		}
		s.partial, s.huge = s.partial[:0], true
		return
	}
	s.partial = append(s.partial, b...)
}

// finish hands over a last line without its newline.
func (s *lineStream) finish() {
	if len(s.partial) > 0 {
		_, _ = s.lw.Write(s.partial)
		s.p.Line(trimEOL(s.partial))
		s.partial = nil
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// lockedWriter serialises the stdout and stderr goroutines' writes to
// the transcript.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// writeAll writes parts with no other write between them.
func (l *lockedWriter) writeAll(parts ...[]byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, b := range parts {
		m, err := l.w.Write(b)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TailBuffer keeps the last Max bytes written (stderr tails, plain-text
// final messages) without growing: a ring, so a write costs what it
// copies, never a shift of what is kept (an agent printing 100 MB in short
// lines would otherwise move the whole tail on every line).
type TailBuffer struct {
	Max  int
	buf  []byte // len(buf) == Max once full
	next int    // where the next byte goes once full
	full bool
}

func (t *TailBuffer) Write(b []byte) (int, error) {
	n := len(b)
	if t.Max <= 0 {
		return n, nil
	}
	if len(b) >= t.Max {
		b = b[len(b)-t.Max:]
	}
	if !t.full {
		if room := t.Max - len(t.buf); len(b) <= room {
			t.buf = append(t.buf, b...)
			if len(t.buf) == t.Max {
				t.full, t.next = true, 0
			}
			return n, nil
		}
		// Fill up, then wrap.
		room := t.Max - len(t.buf)
		t.buf = append(t.buf, b[:room]...)
		b = b[room:]
		t.full, t.next = true, 0
	}
	for len(b) > 0 {
		c := copy(t.buf[t.next:], b)
		b = b[c:]
		t.next = (t.next + c) % t.Max
	}
	return n, nil
}

func (t *TailBuffer) String() string {
	if !t.full {
		return string(t.buf)
	}
	return string(t.buf[t.next:]) + string(t.buf[:t.next])
}
