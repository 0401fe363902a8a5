package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/cluster"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/prd"
	"github.com/ralph-loop/ralph/internal/sandbox"
	"github.com/ralph-loop/ralph/internal/usage"
)

// StatusOptions are `ralph status`'s settings.
type StatusOptions struct {
	IO   *Factory
	JSON bool
	// PRD, when set, is the PRD whose run is asked for: the saved run
	// must be of it.
	PRD string
}

// newCmdStatus builds `ralph status`.
func newCmdStatus(f *Factory, runF func(*StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{IO: f}
	cmd := &cobra.Command{
		Use: "status",
		Example: `  ralph status
  ralph status --json | jq .passed`,
		Short: "Show the progress of the current or last run",
		Long: `Show the current or last run of this repository: passed/total, each item
with its status and attempts, the iterations under way (only while a run is
active), and the stop reason. On a terminal the tables are aligned columns;
piped or redirected it is markdown. --json prints the same as JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			root, repo, err := f.Repo(cmd.Context())
			if err != nil {
				return err
			}
			p := engine.PathsFor(root)
			st, note, err := engine.LoadOrRebuildState(p)
			if err != nil {
				return err
			}
			if note != "" {
				fmt.Fprintf(f.IO.ErrOut, "ralph status: %s (shown rebuilt; the next `ralph run` writes it back)\n", note)
			}
			side, err := listSideBranches(cmd.Context(), repo, st)
			if err != nil {
				return err
			}
			if st == nil && opts.JSON {
				// Machines get JSON whatever there is to say.
				return writeJSON(f.IO.Out, map[string]any{"run": nil, "active": false, "side_branches": side.count(),
					"message": "no ralph run in this repository yet (start one with `ralph run`)"})
			}
			if st == nil {
				return usage.Errorf("no ralph run in %s yet (start one with `ralph run`)", root)
			}
			if opts.PRD != "" && !samePath(absFrom(f, opts.PRD), st.SourcePath) {
				return usage.Errorf("no run of %s in %s yet: the last run (%s) was of %s %s (start one with `ralph run --prd %s`)", opts.PRD, root, st.RunID, st.Source, relOr(root, st.SourcePath), opts.PRD)
			}
			active, _ := engine.ActiveRun(p)
			guidance, err := engine.ReadGuidance(p)
			if err != nil {
				return err
			}
			if opts.JSON {
				passed, blocked, total := st.Counts()
				out := map[string]any{"run": st.RunID, "state": st, "active": active, "passed": passed, "blocked": blocked, "total": total,
					"marked": len(st.Marked()), "next": st.NextStep(), "side_branches": side.count()}
				if active {
					out["next"] = ""
				}
				// codetether's run metadata, by its names.
				out["all_passed"] = total > 0 && passed == total
				out["ready_to_merge"] = total > 0 && passed == total && st.Status == engine.StatusComplete && !active
				out["feature_branch"] = st.Branch
				out["guidance"] = engine.PendingGuidance(guidance, "*")
				out["questions"] = questionViews(p, st.RunID)
				if rec := sandbox.ReadRecord(p.Dir); rec != nil {
					out["sandbox"] = rec
				}
				if ws := cluster.ReadWorkersFile(p.Dir); active && len(ws) > 0 {
					out["workers"] = ws
				}
				if js := cluster.ReadJobsFile(p.Dir); active && len(js) > 0 {
					out["jobs"] = js
				}
				return writeJSON(f.IO.Out, out)
			}
			qs := questionViews(p, st.RunID)
			md := withSandbox(statusMarkdown(st, active, waitingFor(qs)), sandbox.ReadRecord(p.Dir)) + side.markdown() + plansMarkdown(p, st) + questionsMarkdown(qs) + guidanceMarkdown(guidance)
			if active {
				md += workersMarkdown(cluster.ReadWorkersFile(p.Dir)) + jobsMarkdown(cluster.ReadJobsFile(p.Dir))
			}
			if f.IO.IsTTY() {
				md = terminalText(md)
			}
			fmt.Fprint(f.IO.Out, inert(md))
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&opts.PRD, "prd", "", "the PRD `FILE` whose run to show (an error when the last run was of another source)")
	return cmd
}

// samePath reports whether a and b name the same file (links resolved).
func samePath(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// jobsMarkdown lists a coordinator's jobs: queued (no worker has taken
// it) or running, and where.
func jobsMarkdown(js []cluster.JobInfo) string {
	if len(js) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Jobs\n\n| story | job | state | worker | since |\n|---|---|---|---|---|\n")
	for _, j := range js {
		where := "—"
		if j.Worker != "" {
			where = j.Worker + " (" + j.Host + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", j.Item, j.Key, j.State, where, time.Since(j.Since).Round(time.Second))
	}
	return b.String()
}

// workersMarkdown lists a coordinator's remote workers (none for a local
// run): host, slots and the items each is running.
func workersMarkdown(ws []cluster.WorkerInfo) string {
	if len(ws) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Workers\n\n| worker | host | slots | running | agent |\n|---|---|---|---|---|\n")
	for _, w := range ws {
		items := strings.Join(w.Items, ", ")
		if items == "" {
			items = "—"
		}
		ag := w.Agent
		if ag == "" {
			ag = "the run's"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", w.ID, w.Host, w.Slots, items, ag)
	}
	return b.String()
}

// statusMarkdown renders a run as markdown: the summary, every item with
// its state, and a PRD's dependency levels.
func statusMarkdown(st *engine.State, active bool, asked map[string][]string) string {
	var b strings.Builder
	passed, blocked, total := st.Counts()
	kind := map[string]string{"prd": "stories", "tasks": "tasks", "pipeline": "stages"}[st.Source]
	fmt.Fprintf(&b, "# Ralph status\n\n")
	fmt.Fprintf(&b, "- **Run:** %s (%s %s, agent %s)\n", st.RunID, st.Source, st.SourcePath, st.Agent)
	state := st.Status
	if st.Status == engine.StatusRunning && !active {
		state = "interrupted (no ralph process holds the lock; `ralph run` resumes it)"
	}
	fmt.Fprintf(&b, "- **Status:** %s\n", state)
	if st.StopReason != "" {
		fmt.Fprintf(&b, "- **Stop reason:** %s\n", st.StopReason)
	}
	if next := st.NextStep(); next != "" && !active {
		fmt.Fprintf(&b, "- **Next:** %s\n", next)
	}
	fmt.Fprintf(&b, "- **Progress:** %d/%d %s passed%s, %d blocked\n", passed, total, kind, engine.MarkedCount(len(st.Marked())), blocked)
	if len(st.BaseRed) > 0 {
		fmt.Fprintf(&b, "- **Failing since the base** (work for the run, not blamed on any item, never called passed): %s\n", strings.Join(st.BaseRed, "; "))
	}
	for _, g := range st.NoInventory {
		fmt.Fprintf(&b, "- **No test inventory for gate %s:** ralph knows only its exit code; ask its runner for an output ralph reads (-v, --verbose, a JUnit report)\n", g)
	}
	fmt.Fprintf(&b, "- **Iteration:** %s\n", engine.IterationOf(st.Iteration, st.MaxIterations))
	if st.Branch != "" {
		fmt.Fprintf(&b, "- **Branch:** %s\n", st.Branch)
	}
	if st.Usage.InputTokens+st.Usage.OutputTokens > 0 || st.Usage.CostUSD > 0 {
		fmt.Fprintf(&b, "- **Usage:** %d input / %d output tokens, $%.4f\n", st.Usage.InputTokens, st.Usage.OutputTokens, st.Usage.CostUSD)
	}
	if st.TranscriptMax > 0 {
		fmt.Fprintf(&b, "- **Transcripts:** .ralph/transcripts, each capped at %s (transcript_max_bytes; the middle of longer output is dropped)\n", sizeOf(st.TranscriptMax))
	}
	if st.RateLimitedAt != nil {
		fmt.Fprintf(&b, "- **Rate limited until:** %s\n", st.RateLimitedAt.Format(time.RFC3339))
	}
	if len(st.Current) > 0 && !active {
		// Nothing runs: no worker rows, but what a resume will finish.
		var its []string
		for _, c := range st.Current {
			its = append(its, fmt.Sprintf("%s (iteration %d, %s)", c.Item, c.Iteration, c.Phase))
		}
		fmt.Fprintf(&b, "- **Interrupted:** %s; `ralph run` finishes them\n", strings.Join(its, ", "))
	}
	if len(st.Current) > 0 && active {
		fmt.Fprintf(&b, "\n| Worker | Story | Iteration | Attempt | Role | Phase | Elapsed | Last gate | Queue |\n|---|---|---|---|---|---|---|---|---|\n")
		for i, c := range st.Current {
			q := ""
			if c.QueuePos > 0 {
				q = fmt.Sprint(c.QueuePos)
			}
			where := "main tree"
			if c.Worktree != "" {
				where = c.Worktree
			}
			role := c.Role
			if role == "" {
				role = "worker"
			}
			fmt.Fprintf(&b, "| %d (%s) | %s | %d | %d | %s | %s | %s | %s | %s |\n", i+1, where, c.Item, c.Iteration, c.Attempt, role, c.Phase,
				time.Since(c.StartedAt).Round(time.Second), c.LastGate, q)
		}
	}
	fmt.Fprintf(&b, "\n| ID | Title | Status | Attempts | Last role | Commit |\n|---|---|---|---|---|---|\n")
	for _, id := range st.Order {
		is := st.Items[id]
		mark := map[string]string{engine.ItemPassed: "✅ passed", engine.ItemBlocked: "⛔ blocked", engine.ItemRunning: "🔄 running", engine.ItemPending: "⏳ pending",
			engine.ItemMarked: "✋ " + engine.MarkedLabel}[is.Status]
		commit := is.Commit
		if len(commit) > 8 {
			commit = commit[:8]
		}
		if is.Review != "" && is.Status != engine.ItemPassed && is.Status != engine.ItemBlocked {
			mark = "👀 awaiting the " + is.Review
		}
		if is.Plan == engine.PlanWaiting && is.Status != engine.ItemPassed && is.Status != engine.ItemBlocked {
			mark = "📝 plan awaits approval"
		}
		if ids := asked[id]; len(ids) > 0 && is.Status != engine.ItemPassed && is.Status != engine.ItemBlocked {
			mark = "❓ waiting for an answer (" + strings.Join(ids, ", ") + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", id, strings.ReplaceAll(is.Title, "|", "\\|"), mark, is.AttemptsOf(st.MaxAttempts), is.Role, commit)
	}
	if st.Untracked > 0 {
		fmt.Fprintf(&b, "| … | %d more, not started yet | ⏳ pending | | | |\n", st.Untracked)
	}
	for _, id := range st.Order {
		if is := st.Items[id]; is.Status == engine.ItemBlocked && is.Reason != "" {
			fmt.Fprintf(&b, "\n**%s blocked:** %s\n", id, is.Reason)
		}
	}
	for _, id := range st.Order {
		if is := st.Items[id]; is.Status == engine.ItemMarked && is.Reason != "" {
			fmt.Fprintf(&b, "\n**%s marked by hand:** %s\n", id, is.Reason)
		}
	}
	if st.Source == "prd" {
		if doc, err := prd.Load(st.SourcePath); err == nil {
			b.WriteString("\n## Dependency levels\n\n")
			for i, level := range doc.Levels() {
				ids := make([]string, len(level))
				for j, s := range level {
					ids[j] = s.ID
				}
				fmt.Fprintf(&b, "%d. %s\n", i+1, strings.Join(ids, ", "))
			}
		}
	}
	return b.String()
}

// plansMarkdown shows the plans that wait for approval: where each is,
// its beginning, and the commands that decide.
func plansMarkdown(p engine.Paths, st *engine.State) string {
	w := engine.Waiting(st)
	if len(w) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Plans awaiting approval\n")
	for _, id := range w {
		file := engine.PlanFile(p, id)
		fmt.Fprintf(&b, "\n### %s — %s\n\n", id, relOr(p.Root, file))
		if data, err := os.ReadFile(file); err == nil {
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) > 15 {
				lines = append(lines[:15:15], fmt.Sprintf("… (%d more lines in the file)", len(lines)-15))
			}
			for _, l := range lines {
				fmt.Fprintf(&b, "> %s\n", l)
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "`ralph approve %s` · `ralph reject %s --reason \"…\"`\n", id, id)
	}
	return b.String()
}

// sizeOf is a byte count for people: 50 MB, 512 KB, 900 bytes.
func sizeOf(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// inert is s with every control character but line breaks and tabs shown
// as its escape (\x1b), so text from files and people (a guidance, a
// title) cannot move the cursor, recolour or retitle the terminal.
func inert(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !isControl(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// isControl is a character a terminal acts on rather than shows (C0, DEL,
// C1, bidirectional overrides), line breaks and tabs aside.
func isControl(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// terminalText renders the status markdown for a terminal: headings and
// bold labels without their marks, tables as aligned columns (the
// separator row dropped, cells unescaped).
func terminalText(md string) string {
	var out strings.Builder
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "|") {
			l = strings.TrimLeft(l, "#")
			l = strings.TrimPrefix(l, " ")
			l = strings.ReplaceAll(l, "**", "")
			out.WriteString(l + "\n")
			continue
		}
		var rows [][]string
		for ; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
			row := splitRow(lines[i])
			if isSeparator(row) {
				continue
			}
			rows = append(rows, row)
		}
		i--
		widths := map[int]int{}
		for _, r := range rows {
			for j, c := range r {
				widths[j] = max(widths[j], utf8.RuneCountInString(c))
			}
		}
		for _, r := range rows {
			var cells []string
			for j, c := range r {
				if j == len(r)-1 {
					cells = append(cells, c)
				} else {
					cells = append(cells, c+strings.Repeat(" ", widths[j]-utf8.RuneCountInString(c)))
				}
			}
			out.WriteString(strings.TrimRight(strings.Join(cells, "  "), " ") + "\n")
		}
	}
	return out.String()
}

// splitRow splits a markdown table row at its unescaped pipes.
func splitRow(l string) []string {
	l = strings.TrimSpace(l)
	l = strings.TrimPrefix(strings.TrimSuffix(l, "|"), "|")
	var cells []string
	var cur strings.Builder
	for k := 0; k < len(l); k++ {
		switch {
		case l[k] == '\\' && k+1 < len(l) && l[k+1] == '|':
			cur.WriteByte('|')
			k++
		case l[k] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(l[k])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

func isSeparator(row []string) bool {
	for _, c := range row {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}

// withSandbox adds the run's sandbox line after the status line: on, and
// what it denied; off when the run left no record (--no-sandbox).
func withSandbox(md string, rec *sandbox.Record) string {
	line := "- **Sandbox:** off (agents and gates ran unconfined)\n"
	if rec != nil {
		line = "- **Sandbox:** " + rec.Summary() + "\n"
	}
	i := strings.Index(md, "- **Status:**")
	if i < 0 {
		return md + line
	}
	j := strings.IndexByte(md[i:], '\n')
	if j < 0 {
		return md + "\n" + line
	}
	return md[:i+j+1] + line + md[i+j+1:]
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
