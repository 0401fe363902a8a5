package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	tea "charm.land/bubbletea/v2"

	"github.com/ralph-loop/ralph/internal/dashboard"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/iostreams"
	"github.com/ralph-loop/ralph/internal/usage"
)

// withDashboard puts the live dashboard in front of a run: the view
// reads the run's files like `ralph watch` does. It returns the run's
// event sink (nothing while the view is open, then plain, the display
// once the view is closed) and how the run is driven: q closes the view
// and the run goes on here with plain lines; ctrl+c interrupts the run.
func withDashboard(out *iostreams.IOStreams, paths engine.Paths, plain func(engine.Event)) (func(engine.Event), func(context.Context, func(context.Context) (engine.Outcome, error)) (engine.Outcome, error)) {
	var mu sync.Mutex
	var sink func(engine.Event) // nil while the view is open
	onEvent := func(ev engine.Event) {
		mu.Lock()
		s := sink
		mu.Unlock()
		if s != nil {
			s(ev)
		}
	}
	drive := func(ctx context.Context, run func(context.Context) (engine.Outcome, error)) (engine.Outcome, error) {
		runCtx, interrupt := context.WithCancel(ctx)
		defer interrupt()
		model := dashboard.New(dashboard.NewFeed(paths), dashboardControls(paths, interrupt))
		prog := tea.NewProgram(model, tea.WithContext(ctx), tea.WithInput(out.In), tea.WithOutput(out.Out))
		type result struct {
			o   engine.Outcome
			err error
		}
		res := make(chan result, 1)
		go func() {
			o, err := run(runCtx)
			res <- result{o, err}
			prog.Send(dashboard.DoneMsg{})
		}()
		if _, err := prog.Run(); err != nil && ctx.Err() == nil {
			fmt.Fprintf(out.ErrOut, "ralph: the dashboard failed (%v); plain lines follow\n", err)
		} else {
			fmt.Fprint(out.Out, model.FinalFrame())
		}
		if model.Closed {
			fmt.Fprintln(out.ErrOut, "ralph: the dashboard is closed; the run goes on here (`ralph watch` in another terminal shows it again)")
		}
		mu.Lock()
		sink = plain
		mu.Unlock()
		r := <-res
		return r.o, r.err
	}
	return onEvent, drive
}

// dashboardControls are the keys' actions on the run's files.
func dashboardControls(p engine.Paths, interrupt func()) dashboard.Controls {
	answer := engine.AnswerQuestion
	if interrupt != nil {
		// ralph run's own view: the run itself answers.
		answer = engine.AnswerInRun
	}
	return dashboard.Controls{
		Answer: func(id, text string) error {
			_, err := answer(p, id, text, "the dashboard", time.Now())
			return err
		},
		SetPause: func(on bool) error { return setPause(p, on, "the dashboard") },
		Stop:     func() error { return requestStop(p, "the dashboard") },
		Guide: func(text, item string) (string, error) {
			g, err := giveGuidance(p, text, item, "the dashboard", 0)
			return g.ID, err
		},
		Interrupt: interrupt,
		Reattach:  "ralph watch",
	}
}

// WatchOptions are `ralph watch`'s settings.
type WatchOptions struct {
	IO    *Factory
	Plain bool
}

// newCmdWatch builds `ralph watch`.
func newCmdWatch(f *Factory, runF func(*WatchOptions) error) *cobra.Command {
	opts := &WatchOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Show the live dashboard of a run started elsewhere",
		Long: `Attach the dashboard to the run of this repository, wherever it was started:
another terminal, the background, the Stop hook inside Claude Code. It reads
the run's state, events and transcripts, as ` + "`ralph run`" + `'s own dashboard does,
and never runs anything itself: p pauses and resumes the run (.ralph/pause),
s stops it after the current iteration (.ralph/stop), g types guidance for
the next iterations (G for the selected item only; see ` + "`ralph guide`" + `), a
answers the selected item's question (` + "`ralph answer`" + `), enter
opens the selected item's transcript in $PAGER, t hides the agents'
output, q leaves (the run goes on). Not on a terminal, or with --plain, it prints the run's
events as timestamped lines and ends when the run stops.`,
		Example: `  ralph run --plain > run.log 2>&1 &   # or in another terminal
  ralph watch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runWatch(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Plain, "plain", false, "timestamped event lines instead of the dashboard")
	return cmd
}

func runWatch(ctx context.Context, o *WatchOptions) error {
	f := o.IO
	root, _, err := f.Repo(ctx)
	if err != nil {
		return err
	}
	p := engine.PathsFor(root)
	if !o.Plain && f.IO.IsInteractive() {
		model := dashboard.New(dashboard.NewFeed(p), dashboardControls(p, nil))
		_, err := tea.NewProgram(model, tea.WithContext(ctx), tea.WithInput(f.IO.In), tea.WithOutput(f.IO.Out)).Run()
		if err != nil && ctx.Err() == nil {
			return err
		}
		fmt.Fprint(f.IO.Out, model.FinalFrame())
		return nil
	}
	return followEvents(ctx, p, newPlainPrinter(f.IO.ErrOut, f.IO.Color()))
}

// followEvents prints the run's events as they are appended, from the
// start of the run, until the run stops.
func followEvents(ctx context.Context, p engine.Paths, pp *plainPrinter) error {
	var off int64
	var partial []byte
	for {
		active, _ := engine.ActiveRun(p)
		fh, err := os.Open(p.Events)
		if err == nil {
			if st, err := fh.Stat(); err == nil && st.Size() < off {
				off, partial = 0, nil // a new run set the old events aside
			}
			_, _ = fh.Seek(off, io.SeekStart)
			b, _ := io.ReadAll(fh)
			fh.Close()
			off += int64(len(b))
			b = append(partial, b...)
			last := bytes.LastIndexByte(b, '\n')
			partial = append([]byte(nil), b[last+1:]...)
			if last >= 0 {
				for _, line := range bytes.Split(b[:last], []byte{'\n'}) {
					var ev engine.Event
					if json.Unmarshal(line, &ev) == nil {
						pp.event(ev)
					}
				}
			}
		} else if !os.IsNotExist(err) {
			return err
		}
		if !active {
			if off == 0 {
				return usage.Errorf("no run is active and none has written events in %s yet", p.Root)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(dashboard.PollEvery):
		}
	}
}
