package agent

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

// A 100 MB agent output goes to the transcript file as it arrives; the
// harness keeps only bounded tails in memory.
func TestHugeOutputIsStreamedNotHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 MB")
	}
	dir := t.TempDir()
	tpath := filepath.Join(dir, "transcript.log")
	f, err := os.Create(tpath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	// 100 MB: 1,000,000 lines of 99 characters, then a final paragraph;
	// plus one 5 MB line without a newline break to exercise long lines.
	script := `yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -n 1000000; head -c 5000000 /dev/zero | tr '\0' b; printf '\n\nall done <promise>COMPLETE</promise>\n'`
	c := &cmd{Argv: []string{"sh", "-c", script}, Runner: proc.Exec{}}
	res, err := c.Run(context.Background(), Request{Prompt: "p", Dir: dir, Transcript: f, Timeout: 2 * time.Minute})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(tpath)
	if st.Size() < 100_000_000 {
		t.Fatalf("transcript has %d bytes, want ≥ 100 MB", st.Size())
	}
	if !strings.Contains(res.FinalText, "<promise>COMPLETE</promise>") || len(res.FinalText) > 1000 {
		t.Fatalf("final text %q", res.FinalText)
	}
	if p := peak.Load(); p > 64<<20 {
		t.Fatalf("heap in use peaked at %d MB while streaming", p>>20)
	}
}

// A plain-text agent's learnings are read from its whole output: the last
// "## Learnings" section (a later one replaces an echoed template's) and
// every LEARNING: line, however much text follows them.
func TestTextParserLearningsFromWholeOutput(t *testing.T) {
	p := &TextParser{}
	for _, l := range []string{
		"## Learnings", "- (template: write yours here)",
		"LEARNING: early line",
		"work work", "## Learnings", "- real one", "- second", "## Summary", "all done", "",
		"<promise>COMPLETE</promise>",
	} {
		p.Line([]byte(l))
	}
	var res Result
	p.Finish(&res, "")
	want := "## Learnings\nLEARNING: early line\n- real one\n- second"
	if res.Learnings != want {
		t.Fatalf("learnings %q, want %q", res.Learnings, want)
	}
	if res.FinalText != "<promise>COMPLETE</promise>" {
		t.Fatalf("final %q", res.FinalText)
	}
}

// The ring keeps exactly the last Max bytes, whatever the sizes of the
// writes (compared with the obvious slice version).
func TestTailBufferKeepsTheLastBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 7, 64, 1000} {
		tb := &TailBuffer{Max: size}
		var all []byte
		for i := 0; i < 500; i++ {
			b := make([]byte, rng.IntN(3*size+2))
			for j := range b {
				b[j] = byte('a' + rng.IntN(26))
			}
			if n, _ := tb.Write(b); n != len(b) {
				t.Fatalf("Write returned %d for %d bytes", n, len(b))
			}
			all = append(all, b...)
			want := all[max(0, len(all)-size):]
			if got := tb.String(); got != string(want) {
				t.Fatalf("max %d after %d writes: %q, want %q", size, i+1, got, want)
			}
		}
	}
}

// RALPH_USAGE lines report a plain agent's tokens and cost, added up; a
// malformed one is ignored.
func TestTextParserUsage(t *testing.T) {
	p := &TextParser{}
	for _, l := range []string{"working", `RALPH_USAGE: {"input_tokens": 1200, "output_tokens": 30, "cost_usd": 0.25}`, "RALPH_USAGE: not json", `  RALPH_USAGE: {"input_tokens": 800, "cost_usd": 0.05}`, "done"} {
		p.Line([]byte(l))
	}
	var res Result
	p.Finish(&res, "")
	if res.Usage != (Usage{InputTokens: 2000, OutputTokens: 30, CostUSD: 0.3}) {
		t.Fatalf("usage %+v", res.Usage)
	}
}
