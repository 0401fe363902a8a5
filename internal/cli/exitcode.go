package cli

import (
	"errors"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Exit codes: the one table. Every way ralph ends maps to one of these
// here and nowhere else; the README and `ralph --help` list them.
const (
	exitOK          = 0
	ExitError       = 1
	exitUsage       = 2
	exitLimit       = 3 // max iterations or budget reached with work left
	exitBlocked     = 4
	exitAwaiting    = 5 // every item left waits for a person: to approve its plan, or to answer its question (the Stop-hook driver)
	exitUnverified  = 6 // every item left is marked done by hand, not verified
	exitInterrupted = 130
)

// statusCodes maps how a run ended to its exit code.
var statusCodes = map[string]int{
	engine.StatusComplete:         exitOK,
	engine.StatusMaxIterations:    exitLimit,
	engine.StatusBudget:           exitLimit,
	engine.StatusBlocked:          exitBlocked,
	engine.StatusAwaitingApproval: exitAwaiting,
	engine.StatusAwaitingAnswer:   exitAwaiting,
	engine.StatusUnverified:       exitUnverified,
	engine.StatusStopped:          exitInterrupted,
	engine.StatusInterrupted:      exitInterrupted,
	engine.StatusError:            ExitError,
}

// statusError carries a run's end status out of a command; the summary was
// already printed, so Run prints nothing more.
type statusError struct {
	status string
	reason string
}

func (e *statusError) Error() string { return e.status + ": " + e.reason }

// exitError carries an explicit code with a message already printed.
type exitError struct{ code int }

func (e *exitError) Error() string { return "exit" }

// exitCode maps any error to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var se *statusError
	if errors.As(err, &se) {
		if c, ok := statusCodes[se.status]; ok {
			return c
		}
		return ExitError
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// The command line itself (flags, arguments, subcommand), then input
	// the packages below found wrong.
	var ce *commandLineError
	var pe *prd.ParseError
	var ve *prd.ValidationError
	if errors.As(err, &ce) || usage.Is(err) || errors.As(err, &pe) || errors.As(err, &ve) {
		return exitUsage
	}
	return ExitError
}
