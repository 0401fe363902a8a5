// Package usage marks errors in what the user asked for: a bad flag or
// argument, an invalid file, a tree the command cannot work on. The input
// is wrong, not ralph, and ralph exits with 2 (the command line's exit-code
// table asks Is).
package usage

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a message about the user's input; it reads as the message alone.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// Errorf formats a message as an invalid-input error.
func Errorf(format string, a ...any) error {
	return &Error{msg: fmt.Sprintf(format, a...)}
}

// Is reports whether err, or an error it wraps, is invalid input: made by
// Errorf, or a typed error of its own package (a parse or validation error
// with fields) that says so with a UsageError() bool method.
func Is(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return true
	}
	var marked interface{ UsageError() bool }
	return errors.As(err, &marked) && marked.UsageError()
}

// Suggest is the candidates word may be a typo of: those it begins
// (two letters at least), else the nearest ones at most two edits away
// (and fewer than its length); for a "did you mean" after an unknown name.
func Suggest(word string, candidates []string) []string {
	w := strings.ToLower(word)
	var prefixed, nearest []string
	best := 3
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if len(w) >= 2 && strings.HasPrefix(lc, w) && lc != w {
			prefixed = append(prefixed, c)
		}
		switch d := editDistance(w, lc); {
		case d >= len(w): // as far as a new word
		case d < best:
			best, nearest = d, []string{c}
		case d == best:
			nearest = append(nearest, c)
		}
	}
	if len(prefixed) > 0 {
		return prefixed
	}
	return nearest
}

// DidYouMean is "; did you mean X?" (or "X or Y") for the candidates near
// word, "" when none is.
func DidYouMean(word string, candidates []string) string {
	near := Suggest(word, candidates)
	if len(near) == 0 || word == "" {
		return ""
	}
	return "; did you mean " + strings.Join(near, " or ") + "?"
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
