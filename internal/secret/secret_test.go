package secret

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/testenv"
)

func TestStringMasksEnvValuesAndKeyShapes(t *testing.T) {
	m := FromEnv("MY_API_KEY=supersecretvalue123", "GH_TOKEN=tok-abcdefgh", "SHORT_KEY=abc", "HOME=/home/ralph-key-holder")
	in := "key supersecretvalue123, token tok-abcdefgh, short abc, home /home/ralph-key-holder, " +
		"anthropic sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA, openai sk-proj-BBBBBBBBBBBBBBBBBBBBBBBB, " +
		"github ghp_CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC, aws AKIAIOSFODNN7EXAMPLE, google AIzaDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDD"
	got := m.String(in)
	for _, leak := range []string{"supersecretvalue123", "tok-abcdefgh", "sk-ant-api03", "sk-proj-B", "ghp_C", "AKIAIOSFODNN7", "AIzaD"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q leaked: %s", leak, got)
		}
	}
	for _, keep := range []string{"short abc", "/home/ralph-key-holder"} {
		if !strings.Contains(got, keep) {
			t.Errorf("%q was masked but is no secret: %s", keep, got)
		}
	}
	if Off().String(in) != in {
		t.Error("Off masks")
	}
}

// A secret split across writes of any size is still masked in a stream.
func TestWriterMasksAcrossChunks(t *testing.T) {
	m := FromEnv("X_SECRET=0123456789abcdefSECRET")
	text := strings.Repeat("line of agent output\n", 40) + "the value is 0123456789abcdefSECRET and a key sk-ant-api03-EEEEEEEEEEEEEEEEEEEEEEEEEE.\n" + strings.Repeat("z", 700) + "0123456789abcdefSECRET"
	for _, size := range []int{1, 2, 3, 7, 16, 64, 300, 1000, len(text)} {
		var out bytes.Buffer
		w := m.Writer(&out)
		for i := 0; i < len(text); i += size {
			if _, err := w.Write([]byte(text[i:min(i+size, len(text))])); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		got := out.String()
		if strings.Contains(got, "0123456789abcdef") || strings.Contains(got, "sk-ant-api03") {
			t.Fatalf("chunk %d: a secret leaked", size)
		}
		if got != m.String(text) {
			t.Fatalf("chunk %d: stream differs from masking the whole text", size)
		}
	}
}

// Output written a byte at a time is gathered and masked in batches: a key
// split over many writes is still masked, nothing is lost, and a slow
// writer's output reaches the file without waiting for Close.
func TestWriterBatchesSmallWrites(t *testing.T) {
	var out strings.Builder
	w := FromEnv().Writer(&out)
	key := "sk-ant-" + strings.Repeat("k", 40)
	text := strings.Repeat("line of ordinary output\n", 3000) + "the key is " + key + " ok\n" + strings.Repeat("more\n", 2000)
	for i := 0; i < len(text); i++ {
		if _, err := w.Write([]byte{text[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(text, key, mask, 1)
	if out.String() != want {
		t.Fatalf("masked stream differs: %d bytes, want %d; key left: %v", out.Len(), len(want), strings.Contains(out.String(), key))
	}

	slow := &testenv.LockedBuffer{}
	w = FromEnv().Writer(slow)
	w.Write([]byte(strings.Repeat("x", 600) + "\n"))
	time.Sleep(flushEvery + 10*time.Millisecond)
	w.Write([]byte("next line\n"))
	if slow.String() == "" {
		t.Fatal("a slow writer's output waits for Close")
	}
	w.Close()
}

// A slow agent's short line reaches the file within flushEvery even when
// nothing follows it (a live view reads the transcript); a secret that has
// not all arrived is still held back.
func TestWriterFlushesALoneLine(t *testing.T) {
	out := &testenv.LockedBuffer{}
	m := FromEnv("X_TOKEN=abcdefghijklmnop")
	w := m.Writer(out)
	w.Write([]byte("first\n"))
	time.Sleep(10 * time.Millisecond)
	w.Write([]byte("working on S-1\nthe token is abcdefgh"))
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(out.String(), "working on S-1\n") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := out.String(); got != "first\nworking on S-1\n" {
		t.Fatalf("after the lines, without a further write: %q", got)
	}
	w.Write([]byte("ijklmnop done\n"))
	w.Close()
	if got := out.String(); strings.Contains(got, "abcdefgh") || !strings.Contains(got, "the token is "+mask+" done\n") {
		t.Fatalf("the split secret: %q", got)
	}
}

// Output with nothing to mask goes through without being copied: writing
// megabytes in lines allocates next to nothing (a copy per batch was a
// third of the garbage of an agent printing 100 MB).
func TestWriterDoesNotCopyCleanOutput(t *testing.T) {
	line := []byte(strings.Repeat("0", 99) + "\n")
	w := FromEnv("X_SECRET=0123456789abcdefSECRET").Writer(io.Discard)
	defer w.Close()
	for range 2000 { // the buffer at its working size
		w.Write(line)
	}
	allocs := testing.AllocsPerRun(5, func() {
		for range 10_000 { // 1 MB, 15 batches
			w.Write(line)
		}
	})
	if allocs > 4 {
		t.Fatalf("%.0f allocations per MB of clean output", allocs)
	}
}

// Find names what a staged file holds: a variable's value by the
// variable, a key by its shape; never the secret itself. Control: a file
// without one, and masking off.
func TestFindNamesSecrets(t *testing.T) {
	m := FromEnv("RALPH_TEST_API_KEY=supersecretvalue123")
	b := []byte("notes\nthe key is supersecretvalue123 and sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA and ghp_CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC\n")
	got := strings.Join(m.Find(b), "; ")
	for _, want := range []string{"the value of $RALPH_TEST_API_KEY", "an Anthropic API key", "a GitHub token"} {
		if !strings.Contains(got, want) {
			t.Errorf("Find = %q, want %q", got, want)
		}
	}
	if strings.Contains(got, "supersecret") || strings.Contains(got, "sk-ant") {
		t.Errorf("Find leaks the secret: %q", got)
	}
	if found := m.Find([]byte("plain notes, a key-value pair, sk-short\n")); found != nil {
		t.Errorf("control: Find = %q on a file without a secret", found)
	}
	if found := Off().Find(b); found != nil {
		t.Errorf("masking off: Find = %q", found)
	}
	if got := (*Masker)(nil).Find([]byte("AKIAIOSFODNN7EXAMPLE")); len(got) != 1 || got[0] != "an AWS access key id" {
		t.Errorf("nil masker: Find = %q", got)
	}
}
