// Package early answers `ralph task complete` before the rest of ralph has
// started, when the command line asks for nothing more.
//
// Go initializes every package linked into a binary before main runs: for
// ralph that is several milliseconds (the LLM SDKs of the native agent,
// the NATS server, the MCP and web packages) against well under one for
// the task store. Agents run `ralph task complete` once per task, and the
// grep-and-jq recipe it replaces takes about 30 ms, so those milliseconds
// decide whether ralph is the faster way. Go orders initialization by
// imports and then by import path; this package imports only the task
// store, so its init runs before the heavy packages do (the testscript
// task_complete_early checks it), and it completes the task there.
//
// It acts only on `ralph task complete ID` with --commit and --file (or
// $RALPH_TASKS_FILE) and nothing else, outside a loop iteration, on a task
// file whose lock file exists (so .git/info/exclude already lists it), and
// only when the store completes the task in place (Store.CompleteFast). In
// every other case, and on any error, it returns and main runs the full
// command, which does the same work and words every error.
package early

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/tasks"
)

func init() {
	if complete, ok := parseComplete(os.Args[1:], os.Getenv); ok && runComplete(complete) {
		os.Exit(0)
	}
}

// completeArgs is a `ralph task complete` command line.
type completeArgs struct {
	ID, Commit, File string
}

// parseComplete reads `task complete ID [--commit SHA] [--file FILE]` (the
// flags before or after ID, as `--flag value` or `--flag=value`). Anything
// else — another command, another flag, a flag twice, a value that looks
// like a flag, an inner loop iteration — is not for the early path.
func parseComplete(args []string, getenv func(string) string) (completeArgs, bool) {
	var c completeArgs
	if len(args) < 3 || args[0] != "task" || args[1] != "complete" {
		return c, false
	}
	if getenv("RALPH_ITEM_ID") != "" && getenv("RALPH_RUN_ID") != "" {
		return c, false // inside an iteration: the agent's claim, not an archive
	}
	seen := map[string]bool{}
	for i := 2; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			if c.ID != "" {
				return c, false
			}
			c.ID = a
			continue
		}
		name, value, inline := strings.Cut(a, "=")
		if name != "--commit" && name != "--file" || seen[name] {
			return c, false
		}
		seen[name] = true
		if !inline {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
				return c, false
			}
			i++
			value = args[i]
		}
		if value == "" {
			return c, false
		}
		if name == "--commit" {
			c.Commit = value
		} else {
			c.File = value
		}
	}
	if c.File == "" {
		c.File = getenv("RALPH_TASKS_FILE")
	}
	return c, c.ID != "" && c.File != ""
}

// runComplete completes the task in place and prints what it archived, as
// the full command does; false means nothing was done.
func runComplete(c completeArgs) bool {
	file := c.File
	if !filepath.IsAbs(file) {
		wd, err := os.Getwd()
		if err != nil {
			return false
		}
		file = filepath.Join(wd, file)
	}
	st := tasks.Open(file)
	if _, err := os.Stat(st.LockPath); err != nil {
		return false
	}
	done, ok, err := st.CompleteFast(c.ID, c.Commit, time.Now())
	if err != nil || !ok {
		return false
	}
	var out []byte
	for _, t := range done {
		out = append(append(out, t.ID...), '\n')
	}
	_, _ = os.Stdout.Write(out)
	return true
}
