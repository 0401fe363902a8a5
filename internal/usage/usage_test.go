package usage

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// marked is a typed error of another package that calls itself bad input.
type marked struct{ usage bool }

func (m marked) Error() string    { return "marked" }
func (m marked) UsageError() bool { return m.usage }

func TestIs(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("disk full"), false},
		{Errorf("--max-iterations must be at least 1, not %d", 0), true},
		{fmt.Errorf("reading prd.json: %w", Errorf("bad")), true},
		{marked{usage: true}, true},
		{fmt.Errorf("wrapped: %w", marked{usage: true}), true},
		{marked{usage: false}, false},
	} {
		if got := Is(c.err); got != c.want {
			t.Errorf("Is(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if got := Errorf("repo %q: not a folder", "x").Error(); got != `repo "x": not a folder` {
		t.Errorf("message: %q", got)
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"amp", "claude", "cmd", "codex", "gemini", "native", "opencode", "scripted"}
	for word, want := range map[string]string{
		"claud":  "claude",
		"Claude": "claude",
		"codx":   "codex",
		"nat":    "native",
		"gemni":  "gemini",
		"xyzzy":  "",
		"c":      "",
	} {
		if got := strings.Join(Suggest(word, names), " "); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", word, got, want)
		}
	}
	if got := DidYouMean("claud", names); got != "; did you mean claude?" {
		t.Errorf("DidYouMean = %q", got)
	}
}
