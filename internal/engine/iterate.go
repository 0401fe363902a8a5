package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/store"
)

// Transcript is one iteration's log file, streamed to disk.
type Transcript struct {
	Path string
	f    *os.File
}

func openTranscript(dir string, iteration int, item string) (*Transcript, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, fmt.Sprintf("%04d-%s.log", iteration, safeFileName(item)))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Transcript{Path: p, f: f}, nil
}

func (t *Transcript) Write(b []byte) (int, error) { return t.f.Write(b) }
func (t *Transcript) Close() error                { return t.f.Close() }

// promptFile is where an iteration's prompt is written ($RALPH_PROMPT_FILE).
// Parallel workers each get their own, .ralph/prompts/<item>.md, so that
// one worker's prompt (or its agent's output file beside it) never
// replaces another's.
func (e *Engine) promptFile(item string) string {
	if e.cfg.Parallel <= 1 {
		return e.cfg.Paths.PromptFile
	}
	return filepath.Join(e.cfg.Paths.Dir, "prompts", safeFileName(item)+".md")
}

func safeFileName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// begin starts an iteration on it: the tree is prepared, the iteration is
// recorded as under way (phase agent), the prompt is built and written.
func (e *Engine) begin(ctx context.Context, it *Item, iteration int) (*Current, *Attempt, error) {
	cfg := &e.cfg
	src := cfg.Source
	var is ItemState
	var maxIt int
	e.box.read(func(st *State) { is = *st.item(it.ID); maxIt = st.MaxIterations })
	dir, perr := src.Prepare(ctx, it, e.box.snapshot())
	if perr != nil {
		return nil, nil, perr
	}
	// The item's base is taken once, before its first iteration; a retry
	// builds on the same base and needs no git call for it.
	head := is.BaseHead
	if bk, ok := src.(BaseKnower); ok && head == "" {
		head = bk.PreparedBase(it.ID)
	}
	if head == "" {
		head, _ = cfg.Git.HeadOf(ctx, dir)
	}
	cur := &Current{Item: it.ID, Iteration: iteration, Attempt: is.Attempts + 1, Phase: PhaseAgent, BaseHead: head, StartedAt: cfg.Clock.Now().UTC()}
	if dir != cfg.Paths.Root {
		cur.Worktree = dir
	}
	if err := e.box.update(func(st *State) {
		st.Current = append(st.Current, cur)
		s := st.item(it.ID)
		s.Status = ItemRunning
		s.Runs++
		if s.BaseHead == "" {
			s.BaseHead = head
		}
		s.Iterations = append(s.Iterations, cur.Iteration)
	}); err != nil {
		return nil, nil, err
	}
	tr, err := openTranscript(cfg.Paths.Transcripts, cur.Iteration, it.ID)
	if err != nil {
		return nil, nil, err
	}
	att := &Attempt{Item: it, Dir: dir, Promise: cfg.Promise, Log: tr}
	d := PromptData{
		Kind: it.Kind, ProgressPath: cfg.Paths.Progress, ItemID: it.ID, Title: it.Title,
		Description: it.Description, Criteria: it.Criteria, Iteration: cur.Iteration,
		MaxIterations: maxIt, Attempt: cur.Attempt, MaxAttempts: e.maxAttempts(it.ID),
		Promise: cfg.Promise, Progress: ProgressDigest(cfg.Paths.Progress, cfg.ProgressDigest),
		RetryContext: is.LastFailure,
	}
	src.PromptData(it, &d)
	role := ""
	if cfg.RoleText != nil {
		e.box.read(func(st *State) { role = cfg.RoleText(it, st) })
	}
	prompt, err := BuildPrompt(e.tmplFrom, e.template, role, d)
	if err != nil {
		tr.Close()
		return nil, nil, UsageError("%v", err)
	}
	att.Prompt = prompt
	// A derived file (the transcript has the prompt too): no fsync.
	pf := e.promptFile(it.ID)
	if err := os.MkdirAll(filepath.Dir(pf), 0o755); err != nil {
		tr.Close()
		return nil, nil, err
	}
	if err := os.WriteFile(pf, []byte(prompt), 0o644); err != nil {
		tr.Close()
		return nil, nil, err
	}
	fmt.Fprintf(tr, "# ralph iteration %d · %s %s · attempt %d/%d · agent %s\n# started %s\n\n## Prompt\n\n%s\n\n## Agent output\n\n",
		cur.Iteration, it.Kind, it.ID, cur.Attempt, e.maxAttempts(it.ID), cfg.AgentName, cur.StartedAt.Format(time.RFC3339), prompt)
	e.emit(Event{Type: "iteration_started", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt,
		Message: fmt.Sprintf("iteration %d/%d · %s %s · attempt %d/%d", cur.Iteration, maxIt, it.ID, it.Title, cur.Attempt, e.maxAttempts(it.ID)),
		Data:    map[string]any{"transcript": tr.Path, "retry": d.RetryContext != ""}})
	return cur, att, nil
}

// iterate runs one iteration on it. With resume set (a crash during
// verification), the agent is not run again.
func (e *Engine) iterate(ctx context.Context, it *Item, resume *Current, iteration int) error {
	cfg := &e.cfg
	var att *Attempt
	cur := resume
	if cur == nil {
		var err error
		cur, att, err = e.begin(ctx, it, iteration)
		if err != nil {
			return err
		}
		defer att.Log.Close()
		var runs int
		e.box.read(func(st *State) { runs = st.item(it.ID).Runs })
		if err := e.waitForRateLimit(ctx); err != nil {
			return err
		}
		tr, dir, prompt := att.Log, att.Dir, att.Prompt
		res, err := cfg.Agent.Run(ctx, agent.Request{
			Prompt: prompt, PromptFile: e.promptFile(it.ID), Dir: dir, Model: cfg.Model,
			Env: append(append([]string{}, cfg.AgentEnv...),
				"RALPH_PROMPT_FILE="+e.promptFile(it.ID), "RALPH_ITEM_ID="+it.ID, "RALPH_STORY_ID="+it.ID,
				fmt.Sprintf("RALPH_ITERATION=%d", cur.Iteration), fmt.Sprintf("RALPH_ATTEMPT=%d", cur.Attempt),
				"RALPH_WORK_DIR="+dir, "RALPH_STATE_DIR="+cfg.Paths.Dir, "RALPH_RUN_ID="+e.runID()),
			Timeout: cfg.IterationTimeout, Transcript: tr, ItemID: it.ID, Iteration: cur.Iteration, Attempt: runs,
			Started: func(pid int) { _ = e.box.updateLight(func(st *State) { cur.AgentPID = pid }) },
		})
		if ctx.Err() != nil {
			fmt.Fprintf(tr, "\n[ralph] interrupted\n")
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("agent %s: %w", cfg.AgentName, err)
		}
		att.Result = res
		e.emit(Event{Type: "agent_finished", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt,
			Message: agentSummary(res), Data: map[string]any{"exit_code": res.ExitCode, "duration_ms": res.Duration.Milliseconds(), "usage": res.Usage, "session_id": res.SessionID}})
		if res.RateLimit != nil {
			_ = e.box.update(func(st *State) { st.Usage.Add(res.Usage) })
			return e.rateLimited(it, cur, res.RateLimit)
		}
		e.resetBackoff()
		if err := e.claimed(att, res.Usage); err != nil {
			return err
		}
	} else {
		dir, err := cfg.Source.Prepare(ctx, it, e.box.snapshot())
		if err != nil {
			return err
		}
		tr, err := openTranscript(cfg.Paths.Transcripts, cur.Iteration, it.ID)
		if err != nil {
			return err
		}
		defer tr.Close()
		att = &Attempt{Item: it, Dir: dir, Promise: cfg.Promise, Log: tr}
		e.box.read(func(st *State) {
			if s, ok := st.Extra["last_final_"+it.ID].(string); ok {
				att.Result.FinalText = s
			}
		})
		att.Claimed = DetectPromise(att.Result.FinalText, cfg.Promise, "")
		att.Learnings = ExtractLearnings(att.Result.FinalText)
		fmt.Fprintf(tr, "\n[ralph] resumed after a crash: verifying again without running the agent\n")
	}
	return e.conclude(ctx, it, cur, att)
}

// claimed reads the signals of a finished agent run and moves the
// iteration to its verify phase.
func (e *Engine) claimed(att *Attempt, usage agent.Usage) error {
	cfg := &e.cfg
	it := att.Item
	att.Claimed = DetectPromise(att.Result.FinalText, cfg.Promise, att.Prompt)
	att.Learnings = ExtractLearnings(att.Result.FinalText)
	return e.box.update(func(st *State) {
		st.Usage.Add(usage)
		if cur := st.current(it.ID); cur != nil {
			cur.Phase = PhaseVerify
		}
		st.Extra = setExtra(st.Extra, "last_final_"+it.ID, gate.Trim(att.Result.FinalText, 16<<10))
	})
}

// conclude verifies an iteration and decides: pass (accept through the
// merge queue) or fail (spend an attempt, maybe block).
func (e *Engine) conclude(ctx context.Context, it *Item, cur *Current, att *Attempt) error {
	cfg := &e.cfg
	src := cfg.Source
	tr, dir := att.Log, att.Dir
	v := src.Verify(ctx, att, e.box.snapshot())
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e.box.mutate(func(st *State) { cur.LastGate = v.Summary }) // persisted with the next write
	for _, t := range v.Tampered {
		e.emit(Event{Type: "tamper_detected", Iteration: cur.Iteration, Item: it.ID, Message: t})
	}
	for _, g := range v.Gates {
		e.emit(Event{Type: "gate_result", Iteration: cur.Iteration, Item: it.ID,
			Message: fmt.Sprintf("gate %s %s (%s)", g.Name, map[bool]string{true: "passed", false: "FAILED"}[g.Passed], g.Duration.Round(time.Millisecond)),
			Data:    map[string]any{"gate": g.Name, "passed": g.Passed, "exit_code": g.ExitCode, "duration_ms": g.Duration.Milliseconds()}})
	}
	// A passing item of a staging source gets its file list from staging
	// (no extra git call); every other iteration asks git now, before the
	// commit makes the tree clean.
	var files []string
	if !v.Passed || e.stager() == nil {
		files, _ = cfg.Git.Changed(ctx, dir, ".ralph/")
	}

	if v.Passed {
		commit, rv, err := e.accept(ctx, it, cur, att, v)
		if err != nil {
			return err
		}
		if att.Files != nil {
			files = att.Files
		}
		if rv == nil {
			e.appendProgress(it, cur, "passed", v, att.Learnings, files, commit)
			e.markPassed(it, cur.Iteration, commit, &v, v.Summary)
			fmt.Fprintf(tr, "\n[ralph] %s passed: %s; commit %s\n", it.ID, v.Summary, short(commit))
			// Dependents may start now; the tree is tidied after that,
			// off their path (and off the agent slots).
			e.slots.poke()
			if cl, ok := src.(Cleaner); ok {
				cl.Cleanup(ctx, att)
			}
			return nil
		}
		v = *rv
	}

	// Failed iteration: spend an attempt, keep the tree for the retry.
	sig := failureSignature(v)
	blocked := false
	_ = e.box.update(func(st *State) {
		s := st.item(it.ID)
		s.Attempts++
		s.LastResult = v.Summary
		s.LastFailure = v.Failure
		st.dropCurrent(it.ID)
		if st.Breaker.LastSignature == sig {
			st.Breaker.SameCount++
		} else {
			st.Breaker.LastSignature, st.Breaker.SameCount = sig, 1
		}
		st.Breaker.NoProgress++
		if s.Attempts >= e.maxAttempts(it.ID) {
			blocked = true
			s.Status = ItemBlocked
			s.Reason = fmt.Sprintf("failed %d attempts; last: %s", s.Attempts, v.Summary)
		} else {
			s.Status = ItemPending
		}
	})
	e.appendProgress(it, cur, "failed", v, att.Learnings, files, "")
	fmt.Fprintf(tr, "\n[ralph] %s not passed: %s\n", it.ID, v.Summary)
	e.emit(Event{Type: "item_failed", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt, Message: fmt.Sprintf("%s attempt %d/%d failed: %s", it.ID, cur.Attempt, e.maxAttempts(it.ID), v.Summary)})
	if blocked {
		var reason string
		e.box.read(func(st *State) { reason = st.Items[it.ID].Reason })
		if berr := src.Block(ctx, it, e.box.snapshot(), reason); berr != nil {
			return berr
		}
		e.emit(Event{Type: "item_blocked", Iteration: cur.Iteration, Item: it.ID, Message: fmt.Sprintf("%s blocked: %s", it.ID, reason)})
	}
	return nil
}

func setExtra(m map[string]any, k string, v any) map[string]any {
	if m == nil {
		m = map[string]any{}
	}
	m[k] = v
	return m
}

func (e *Engine) markPassed(it *Item, iteration int, commit string, v *Verdict, summary string) {
	now := e.cfg.Clock.Now().UTC()
	_ = e.box.update(func(st *State) {
		s := st.item(it.ID)
		s.Status = ItemPassed
		s.Commit = commit
		s.PassedAt = &now
		s.LastResult = summary
		s.LastFailure = ""
		s.Reason = ""
		s.BaseHead = ""
		st.dropCurrent(it.ID)
		delete(st.Extra, "last_final_"+it.ID)
		st.Breaker = Breaker{}
	})
	e.emit(Event{Type: "item_passed", Iteration: iteration, Item: it.ID, Message: fmt.Sprintf("%s passed (%s), commit %s", it.ID, summary, short(commit)), Data: map[string]any{"commit": commit}})
	if it.Kind == "stage" {
		var next *Item
		if n, err := e.cfg.Source.Next(e.box.snapshot(), nil); err == nil {
			next = n
		}
		to := "(end of pipeline)"
		if next != nil {
			to = next.ID
		}
		e.emit(Event{Type: "stage_advanced", Iteration: iteration, Item: it.ID, Message: fmt.Sprintf("stage %s done; next: %s", it.ID, to), Data: map[string]any{"from": it.ID, "to": to}})
	}
}

func failureSignature(v Verdict) string {
	s := v.Summary + "\n" + v.Failure
	if len(s) > 2000 {
		s = s[:2000]
	}
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

func agentSummary(r agent.Result) string {
	parts := []string{fmt.Sprintf("agent exited %d after %s", r.ExitCode, r.Duration.Round(time.Millisecond))}
	if r.TimedOut {
		parts[0] = fmt.Sprintf("agent timed out after %s and was killed", r.Duration.Round(time.Millisecond))
	}
	if r.Usage.InputTokens+r.Usage.OutputTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d in / %d out tokens", r.Usage.InputTokens, r.Usage.OutputTokens))
	}
	if r.Usage.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", r.Usage.CostUSD))
	}
	if r.RateLimit != nil {
		parts = append(parts, "rate limited: "+r.RateLimit.Message)
	}
	return strings.Join(parts, ", ")
}

// AgentFailure renders a failed agent run as a verdict (no gates run: the
// run itself did not finish).
func AgentFailure(r agent.Result) Verdict {
	what := fmt.Sprintf("agent exited with code %d", r.ExitCode)
	if r.TimedOut {
		what = "agent timed out and was killed"
	}
	msg := what
	if r.ErrorText != "" {
		msg += ": " + r.ErrorText
	}
	return Verdict{Summary: what, Failure: "The previous agent run did not finish: " + gate.Trim(msg, 2000)}
}

func (e *Engine) appendProgress(it *Item, cur *Current, status string, v Verdict, learnings, files []string, commit string) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s · %s %s · iteration %d · %s\n\n", e.cfg.Clock.Now().UTC().Format(time.RFC3339), it.Kind, it.ID, cur.Iteration, status)
	fmt.Fprintf(&b, "- Title: %s\n- Attempt: %d\n- Result: %s\n", it.Title, cur.Attempt, v.Summary)
	if commit != "" {
		fmt.Fprintf(&b, "- Commit: %s\n", short(commit))
	}
	if len(files) > 0 {
		if len(files) > 20 {
			files = append(files[:20:20], fmt.Sprintf("… %d more", len(files)-20))
		}
		fmt.Fprintf(&b, "- Files changed: %s\n", strings.Join(files, ", "))
	}
	if len(learnings) > 0 {
		b.WriteString("- Learnings:\n")
		for _, l := range learnings {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
	}
	_ = store.AppendLog(e.cfg.Paths.Progress, []byte(strings.TrimRight(b.String(), "\n")))
}
