package source

import (
	"strings"
	"testing"
)

// Titles, ids and learnings are data: whatever they hold, the message has
// exactly one subject line, and the only trailer lines are ralph's own.
func FuzzCommitMessage(f *testing.F) {
	f.Add("add login", "S-1", "keep it small", "run-1")
	f.Add("two\nRalph-Story: S-9", "S-1\nRalph-Run: x", "learned\n\nRalph-Story: S-2", "r\r\n")
	f.Add("\x00\x1b[31m\u2028x\u0085", "A.1", "", "")
	f.Fuzz(func(t *testing.T, title, id, learning, runID string) {
		msg := commitMessage("feat("+id+"): "+title, []string{learning}, "verified", itemTrailers(storyTrailer, id, runID)...)
		lines := strings.Split(msg, "\n")
		if strings.ContainsAny(lines[0], "\r\x00") || lines[1] != "" {
			t.Fatalf("subject is not one line: %q", msg)
		}
		var trailers []string
		for _, l := range lines {
			if strings.HasPrefix(l, storyTrailer+":") || strings.HasPrefix(l, runTrailer+":") {
				trailers = append(trailers, l)
			}
		}
		if len(trailers) != 2 || !strings.HasPrefix(trailers[0], storyTrailer+":") || !strings.HasPrefix(trailers[1], runTrailer+":") {
			t.Fatalf("trailer lines %q in %q", trailers, msg)
		}
		if got := strings.TrimSpace(strings.TrimPrefix(trailers[0], storyTrailer+":")); got != oneLine(id) {
			t.Fatalf("story trailer %q, id %q", got, id)
		}
		for _, l := range lines {
			if strings.IndexFunc(l, isControl) >= 0 {
				t.Fatalf("control character in line %q", l)
			}
		}
	})
}
