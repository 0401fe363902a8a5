package proc

import (
	"os"

	"mvdan.cc/sh/v3/shell"
)

// SplitArgs splits a command line into an argv the way a POSIX shell
// splits a command's words (quotes, backslashes, ~ and {a,b}), without
// running a shell, so `--agent-cmd 'python3 agent.py --flag "a b"'` becomes
// an argv. Operators (|, >, ;, &&) and command substitution are errors:
// there is no shell to run them. A variable ($NAME, "${NAME}") is passed
// to the program as written, not expanded: it is meant for the program's
// environment (RALPH_PROMPT_FILE and the like exist only there), so
// `sh -c "cat $RALPH_PROMPT_FILE"` works as it reads.
func SplitArgs(s string) ([]string, error) {
	return shell.Fields(s, func(name string) string {
		if name == "HOME" {
			return os.Getenv("HOME") // ~ asks for HOME: it, and $HOME, are the home folder
		}
		return "$" + name
	})
}
