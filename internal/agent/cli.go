package agent

import (
	"bufio"
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

// RunCLI runs inv through r: files written, prompt on stdin (or nothing:
// stdin is always closed so a CLI never waits for a person), stdout and
// stderr streamed to the transcript, stdout fed to p line by line.
func RunCLI(ctx context.Context, r proc.Runner, inv Invocation, req Request, p StreamParser) (Result, error) {
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
	pr, pw := io.Pipe()
	tail := &TailBuffer{Max: 8 << 10}
	lw := &lockedWriter{w: transcript}
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReaderSize(pr, 256<<10)
		for {
			line, err := br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				// An enormous line: keep streaming it to the transcript but
				// do not parse it (no format puts the final answer in a
				// line this size without a newline).
				_, _ = lw.Write(line)
				for errors.Is(err, bufio.ErrBufferFull) {
					line, err = br.ReadSlice('\n')
					_, _ = lw.Write(line)
				}
				if err != nil {
					break
				}
				continue
			}
			if len(line) > 0 {
				_, _ = lw.Write(line)
				p.Line(trimEOL(line))
			}
			if err != nil {
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	res, err := r.Run(ctx, proc.Cmd{
		Argv:    inv.Argv,
		Dir:     req.Dir,
		Env:     proc.Environ(nil, append(append([]string{}, inv.Env...), req.Env...)...),
		Stdin:   stdin,
		Stdout:  pw,
		Stderr:  io.MultiWriter(lw, tail),
		Timeout: req.Timeout,
		Started: req.Started,
	})
	_ = pw.Close()
	<-done
	out := Result{ExitCode: res.ExitCode, TimedOut: res.TimedOut, Duration: res.Duration}
	if errors.Is(err, proc.ErrNotFound) {
		return out, err
	}
	p.Finish(&out, tail.String())
	if out.TimedOut && out.ErrorText == "" {
		out.ErrorText = fmt.Sprintf("timed out after %s", req.Timeout)
	}
	return out, err
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
