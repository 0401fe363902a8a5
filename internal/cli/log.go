package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/dashboard"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/usage"
)

// LogOptions are `ralph log`'s settings.
type LogOptions struct {
	IO        *Factory
	Iteration int // 0: the newest
	Follow    bool
	Raw       bool
	Poll      time.Duration
}

// newCmdLog builds `ralph log`.
func newCmdLog(f *Factory, runF func(*LogOptions) error) *cobra.Command {
	opts := &LogOptions{IO: f, Poll: 200 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "log [ITERATION]",
		Short: "Show an iteration's transcript for people: tool calls, text, gates",
		Long: `Show the transcript of an iteration of the current or last run (the newest
when no ITERATION is given), rendered for people: the prompt folded, the
agent's stream (Claude Code, Codex, opencode, Gemini JSON) as its tool calls
("→ Write add.go", "→ Bash go test ./...") and its text, long tool output
folded after 4 lines, then ralph's gate results and verdict. A plain
command's output is shown as it printed it. --follow keeps reading as the
agent works and goes on to the next iteration until the run stops; --raw
prints the file as it is.`,
		Example: `  ralph log            # the newest iteration
  ralph log 3          # iteration 3
  ralph log --follow   # watch the run's iterations as they happen`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 {
					return usage.Errorf("ITERATION must be a number from 1, not %q", args[0])
				}
				opts.Iteration = n
			}
			if runF != nil {
				return runF(opts)
			}
			return runLog(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep reading as the agent works, and go on to the next iterations until the run stops")
	cmd.Flags().BoolVar(&opts.Raw, "raw", false, "print the transcript file as it is")
	return cmd
}

func runLog(ctx context.Context, o *LogOptions) error {
	f := o.IO
	root, _, err := f.Repo(ctx)
	if err != nil {
		return err
	}
	p := engine.PathsFor(root)
	byIter, newest, err := engine.TranscriptFiles(p)
	if err != nil {
		return err
	}
	if newest == 0 {
		return usage.Errorf("no iteration has started in %s yet (`ralph run` starts one)", root)
	}
	n := o.Iteration
	if n == 0 {
		n = newest
	}
	path, ok := byIter[n]
	if !ok {
		return usage.Errorf("no iteration %d in this run (it has 1 to %d)", n, newest)
	}
	out := f.IO.Out
	for {
		lr := &logRenderer{w: out, raw: o.Raw}
		if err := lr.file(ctx, path, o.Follow, o.Poll, func() bool { return nextIteration(p, n) != "" || !runActive(p) }); err != nil {
			return err
		}
		if !o.Follow {
			return nil
		}
		next := nextIteration(p, n)
		if next == "" {
			return nil // the run stopped
		}
		n++
		path = next
		fmt.Fprintln(out)
	}
}

// nextIteration is the transcript of the iteration after n, once it
// started ("" until then).
func nextIteration(p engine.Paths, n int) string {
	byIter, _, _ := engine.TranscriptFiles(p)
	return byIter[n+1]
}

func runActive(p engine.Paths) bool {
	active, _ := engine.ActiveRun(p)
	return active
}

// logRenderer prints a transcript for people (dashboard.LogRenderer),
// following it as it grows.
type logRenderer struct {
	w   io.Writer
	raw bool
	r   *dashboard.LogRenderer
}

// file renders path; with follow it waits for more at the end until done
// says the iteration is over (then it reads what is left and returns).
func (r *logRenderer) file(ctx context.Context, path string, follow bool, poll time.Duration, done func() bool) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	if r.r == nil {
		r.r = dashboard.NewLogRenderer(r.w, r.raw)
	}
	br := bufio.NewReader(fh)
	var partial string
	finished := false
	for {
		line, err := br.ReadString('\n')
		if err == nil {
			r.r.Line(strings.TrimSuffix(partial+line, "\n"))
			partial = ""
			continue
		}
		partial += line
		if err != io.EOF {
			return err
		}
		if !follow || finished {
			break
		}
		// At the end: once the iteration is over, one more read takes
		// what it wrote last.
		finished = done()
		select {
		case <-ctx.Done():
			r.r.Flush()
			return nil
		case <-time.After(poll):
		}
	}
	if partial != "" {
		r.r.Line(partial)
	}
	r.r.Flush()
	return nil
}
