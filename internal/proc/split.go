package proc

import (
	"fmt"
	"os"

	"mvdan.cc/sh/v3/shell"
)

// SplitArgs splits a command line into an argv the way a POSIX shell
// splits a command's words (quotes, backslashes, ~, $VAR and {a,b}), without
// running a shell, so `--agent-cmd 'python3 agent.py --flag "a b"'` becomes
// an argv. Operators (|, >, ;, &&) and command substitution are errors:
// there is no shell to run them. Variables come from ralph's environment
// as the line is split, not the program's: an unset one is an error rather
// than an empty word, since it is most likely meant for the program.
func SplitArgs(s string) ([]string, error) {
	var unset string
	args, err := shell.Fields(s, func(name string) string {
		v, ok := os.LookupEnv(name)
		if !ok && unset == "" && name != "IFS" && name != "PWD" { // the expander's own look-ups
			unset = name
		}
		return v
	})
	if err != nil {
		return nil, err
	}
	if unset != "" {
		return nil, fmt.Errorf("$%s is not set (ralph expands variables from its own environment when it splits the command line; write '$%s' in single quotes to pass it to the program as it is)", unset, unset)
	}
	return args, nil
}
