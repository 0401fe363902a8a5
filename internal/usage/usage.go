// Package usage marks errors in what the user asked for: a bad flag or
// argument, an invalid file, a tree the command cannot work on. The input
// is wrong, not ralph, and ralph exits with 2 (the command line's exit-code
// table asks Is).
package usage

import (
	"errors"
	"fmt"
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
