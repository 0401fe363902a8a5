package agent

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
)

type lineRecorder struct{ lines []string }

func (r *lineRecorder) Line(b []byte)          { r.lines = append(r.lines, string(b)) }
func (r *lineRecorder) Finish(*Result, string) {}

// However the process's output is cut into writes, the transcript gets it
// byte for byte, every line reaches the parser once, whole, a line longer
// than maxParsedLine is written but not parsed, and a last line without
// its newline still counts.
func TestLineStreamChunking(t *testing.T) {
	huge := strings.Repeat("h", maxParsedLine+10)
	input := "first\r\nsecond\n\n" + huge + "\nafter huge\n" + strings.Repeat("x", 1000) + "\nlast without newline"
	want := []string{"first", "second", "", "after huge", strings.Repeat("x", 1000), "last without newline"}
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 200; trial++ {
		var transcript bytes.Buffer
		rec := &lineRecorder{}
		s := &lineStream{lw: &lockedWriter{w: &transcript}, p: rec}
		rest := []byte(input)
		for len(rest) > 0 {
			n := 1 + rng.Intn(min(len(rest), []int{3, 100, 70000}[trial%3]))
			chunk := append([]byte(nil), rest[:n]...) // the writer reuses its buffer
			s.Write(chunk)
			for i := range chunk {
				chunk[i] = '#'
			}
			rest = rest[n:]
		}
		s.finish()
		if transcript.String() != input {
			t.Fatalf("trial %d: the transcript differs from the output (%d bytes, want %d)", trial, transcript.Len(), len(input))
		}
		if strings.Join(rec.lines, "|") != strings.Join(want, "|") {
			t.Fatalf("trial %d: parsed %q, want %q", trial, rec.lines, want)
		}
	}
}
