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
}

// System returns the real streams.
func System() *IOStreams {
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, isTTY: term.IsTerminal(int(os.Stdout.Fd()))}
}

// Test returns streams backed by buffers.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errb := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errb}, in, out, errb
}

// IsTTY reports whether standard output is a terminal. Nothing renders
// differently on one yet: every command prints plain lines either way.
func (s *IOStreams) IsTTY() bool { return s.isTTY }

// SetTTY switches TTY mode (tests).
func (s *IOStreams) SetTTY(v bool) { s.isTTY = v }
