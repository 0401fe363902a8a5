// Package iostreams carries the process's input and output so commands can
// be tested with in-memory buffers and a switchable TTY flag.
package iostreams

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are a command's standard streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	isTTY  bool
	// color: ErrOut is a terminal that takes colour (no NO_COLOR, no
	// TERM=dumb).
	color bool
	// inTTY: In is a terminal (keys can be read).
	inTTY bool
	// noSize: Out is a terminal that says it has no rows or columns (a
	// 0×0 pty): a live view would draw nothing there.
	noSize bool
}

// System returns the real streams.
func System() *IOStreams {
	_, noColor := os.LookupEnv("NO_COLOR")
	color := term.IsTerminal(int(os.Stderr.Fd())) && !noColor && os.Getenv("TERM") != "dumb"
	w, h, err := term.GetSize(int(os.Stdout.Fd()))
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, isTTY: term.IsTerminal(int(os.Stdout.Fd())), color: color,
		inTTY: term.IsTerminal(int(os.Stdin.Fd())), noSize: err == nil && (w == 0 || h == 0)}
}

// Test returns streams backed by buffers.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errb := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errb}, in, out, errb
}

// IsTTY reports whether standard output is a terminal. Nothing renders
// differently on one yet: every command prints plain lines either way.
func (s *IOStreams) IsTTY() bool { return s.isTTY }

// Color reports whether ErrOut takes ANSI colour: a terminal, without
// NO_COLOR (https://no-color.org) or TERM=dumb.
func (s *IOStreams) Color() bool { return s.color }

// SetColor switches colour (tests).
func (s *IOStreams) SetColor(v bool) { s.color = v }

// IsInteractive reports whether a person is at a terminal: standard input
// and output are both one (a live view can be drawn and keys read), it
// has a size (not 0×0), and TERM is not dumb.
func (s *IOStreams) IsInteractive() bool {
	return s.isTTY && s.inTTY && !s.noSize && os.Getenv("TERM") != "dumb"
}

// SetTTY switches TTY mode (tests).
func (s *IOStreams) SetTTY(v bool) { s.isTTY = v }
