package cli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/usage"
)

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{&statusError{status: engine.StatusComplete}, 0},
		{&statusError{status: engine.StatusMaxIterations}, 3},
		{&statusError{status: engine.StatusBudget}, 3},
		{&statusError{status: engine.StatusBlocked}, 4},
		{&statusError{status: engine.StatusUnverified}, 6},
		{&statusError{status: engine.StatusInterrupted}, 130},
		{&statusError{status: engine.StatusStopped}, 130},
		{&statusError{status: engine.StatusError}, 1},
		{usage.Errorf("bad"), 2},
		{fmt.Errorf("wrapped: %w", usage.Errorf("bad")), 2},
		{&prd.ParseError{File: "p.json", Line: 1, Column: 2, Msg: "x"}, 2},
		{&prd.ValidationError{File: "p.json"}, 2},
		{&commandLineError{err: errors.New(`unknown flag: --nope`)}, 2},
		{fmt.Errorf("in run: %w", &commandLineError{err: errors.New("accepts at most 1 arg(s), received 2")}), 2},
		{errors.New(`unknown flag: --nope`), 1}, // no matching of message text
		{errors.New("disk full"), 1},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestEveryRunStatusHasAnExitCode(t *testing.T) {
	for _, s := range []string{engine.StatusComplete, engine.StatusMaxIterations, engine.StatusBudget, engine.StatusBlocked, engine.StatusUnverified, engine.StatusAwaitingApproval, engine.StatusStopped, engine.StatusInterrupted, engine.StatusError} {
		if _, ok := statusCodes[s]; !ok {
			t.Errorf("status %s has no exit code", s)
		}
	}
}
