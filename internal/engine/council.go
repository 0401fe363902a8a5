package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/store"
)

// CouncilRole is the role whose text a council member's prompt carries and
// whose roles.yaml agent entry runs it.
const CouncilRole = "council"

// VoteRecord is one council member's vote as saved under
// .ralph/council/<item>/<iteration>-<member>.json.
type VoteRecord struct {
	Item       string    `json:"item"`
	Iteration  int       `json:"iteration"`
	Member     int       `json:"member"`
	Of         int       `json:"of"`
	Agent      string    `json:"agent"`
	Model      string    `json:"model,omitempty"`
	Vote       string    `json:"vote"` // approve, reject or abstain
	Reasons    string    `json:"reasons,omitempty"`
	Error      string    `json:"error,omitempty"` // why the member's run gave no vote
	Transcript string    `json:"transcript"`
	At         time.Time `json:"at"`
}

// councilWhy says why an item whose claim passed its gates needs a
// council's majority ("" when it does not): its critical field, or the
// first council rule in roles.yaml that holds.
func (e *Engine) councilWhy(x *iteration) (string, error) {
	if x.it.Critical {
		return "critical: true", nil
	}
	if e.cfg.Roles == nil || len(e.cfg.Roles.Council) == 0 {
		return "", nil
	}
	t, err := e.cfg.Roles.CouncilRule(e.roleEnv(x.it, e.box.snapshot(), x.cur.Iteration))
	if err != nil || t == nil {
		return "", err
	}
	return e.triggerWhy(t), nil
}

// councilVote puts a passing claim to the council when the item needs
// one: nil when it does not or the council approved, else the verdict of
// a failed claim with the council's reasons as the next iteration's
// context.
func (e *Engine) councilVote(ctx context.Context, x *iteration, v Verdict) (*Verdict, error) {
	why, err := e.councilWhy(x)
	if err != nil {
		return nil, UsageError("%v", err)
	}
	if why == "" {
		return nil, nil
	}
	ok, tally, rejection, err := e.council(ctx, x, v, why)
	if err != nil || ok {
		return nil, err
	}
	x.councilSaidNo = true
	x.att.Rejected = rejection
	return &Verdict{Claimed: true, Gates: v.Gates, Summary: "the council did not approve it (" + tally + ")", Failure: rejection}, nil
}

// councilDir holds an item's votes.
func (e *Engine) councilDir(item string) string {
	return filepath.Join(e.cfg.Paths.Dir, "council", safeFileName(item))
}

// council runs the vote on an item whose claim passed its gates: K
// members, each its own agent process with its own prompt and transcript,
// one after another in the item's tree. Each vote is saved before the
// next member starts. A majority of approvals passes; otherwise the
// rejection (the members' reasons, abstentions named) is returned as the
// next iteration's context.
func (e *Engine) council(ctx context.Context, x *iteration, v Verdict, why string) (approved bool, tally, rejection string, err error) {
	cfg := &e.cfg
	it, cur := x.it, x.cur
	k := cfg.Council
	e.emit(Event{Type: "council_started", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt,
		Message: fmt.Sprintf("%s passed its gates and needs a council (%s): %s vote, a majority must approve", it.ID, why, plural(k, "member")),
		Data:    map[string]any{"members": k, "why": why}})
	text, err := e.roleText(CouncilRole)
	if err != nil {
		return false, "", "", UsageError("%v", err)
	}
	var base string
	e.box.read(func(st *State) {
		if is := st.Items[it.ID]; is != nil {
			base = is.BaseHead
		}
	})
	give, err := e.slots.retake(ctx, it.ID)
	if err != nil {
		return false, "", "", err
	}
	defer give()
	var votes []VoteRecord
	for m := 1; m <= k; m++ {
		rec, err := e.councilMember(ctx, x, v, text, base, m, k)
		if err != nil {
			return false, "", "", err
		}
		votes = append(votes, rec)
	}
	n := map[string]int{}
	for _, r := range votes {
		n[r.Vote]++
	}
	approved = 2*n[roles.VoteApprove] > k
	tally = fmt.Sprintf("%d approve, %d reject, %d abstain of %d", n[roles.VoteApprove], n[roles.VoteReject], n[roles.VoteAbstain], k)
	decided := "approved"
	if !approved {
		decided = "rejected"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s · %s %s · iteration %d · Council (%s)\n\n- Decision: %s (%s)\n", cfg.Clock.Now().UTC().Format(time.RFC3339), it.Kind, it.ID, cur.Iteration, why, decided, tally)
	for _, r := range votes {
		fmt.Fprintf(&b, "- Member %d (%s): %s", r.Member, r.Agent, r.Vote)
		if r.Reasons != "" {
			fmt.Fprintf(&b, ": %s", oneLine(r.Reasons, 300))
		} else if r.Error != "" {
			fmt.Fprintf(&b, " (%s)", r.Error)
		}
		b.WriteString("\n")
	}
	e.logProgress([]byte(strings.TrimRight(b.String(), "\n")))
	e.emit(Event{Type: "council_decided", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt,
		Message: fmt.Sprintf("%s: the council %s it (%s)", it.ID, decided, tally),
		Data:    map[string]any{"approved": approved, "approve": n[roles.VoteApprove], "reject": n[roles.VoteReject], "abstain": n[roles.VoteAbstain], "members": k}})
	if approved {
		return true, tally, "", nil
	}
	var r strings.Builder
	fmt.Fprintf(&r, "A council of %d reviewers voted on this work and did not approve it (%s). Address their reasons:\n", k, tally)
	for _, rec := range votes {
		switch rec.Vote {
		case roles.VoteReject:
			fmt.Fprintf(&r, "\nMember %d rejected it:\n%s\n", rec.Member, gate.Trim(rec.Reasons, 2<<10))
		case roles.VoteAbstain:
			fmt.Fprintf(&r, "\nMember %d abstained (no vote could be read: %s).\n", rec.Member, rec.Error)
		}
	}
	return false, tally, strings.TrimSpace(r.String()), nil
}

// councilMember runs one member and saves its vote. A member whose run
// fails or whose message has no readable vote abstains; only a cancelled
// run is an error.
func (e *Engine) councilMember(ctx context.Context, x *iteration, v Verdict, text, base string, m, k int) (VoteRecord, error) {
	cfg := &e.cfg
	it, cur := x.it, x.cur
	label := fmt.Sprintf("council-%d", m)
	rec := VoteRecord{Item: it.ID, Iteration: cur.Iteration, Member: m, Of: k, Vote: roles.VoteAbstain}
	choice, err := e.agentFor(it, CouncilRole)
	if err != nil {
		return rec, UsageError("%v", err)
	}
	rec.Agent, rec.Model = choice.Name, choice.Model
	tr, err := e.openTranscript(cur.Iteration, it.ID, label)
	if err != nil {
		return rec, err
	}
	defer tr.Close()
	rec.Transcript = tr.Path
	prompt := councilPrompt(text, it, v, base, m, k)
	pf := filepath.Join(cfg.Paths.Dir, "prompts", safeFileName(it.ID)+"."+label+".md")
	if err := os.MkdirAll(filepath.Dir(pf), 0o755); err != nil {
		return rec, err
	}
	if err := os.WriteFile(pf, []byte(prompt), 0o600); err != nil {
		return rec, err
	}
	fmt.Fprintf(tr, "# ralph iteration %d · %s %s · council member %d/%d · agent %s\n# started %s\n\n## Prompt\n\n%s\n\n## Agent output\n\n",
		cur.Iteration, it.Kind, it.ID, m, k, choice.Name, cfg.Clock.Now().UTC().Format(time.RFC3339), prompt)
	if err := e.waitForRateLimit(ctx); err != nil {
		return rec, err
	}
	s := setup{Item: it, Iteration: cur.Iteration, Attempt: cur.Attempt, Runs: m, Agent: choice}
	req := e.request(s, x.att.Dir, prompt, CouncilRole, e.runID())
	req.PromptFile, req.Transcript = pf, tr
	req.ItemID = it.ID + "#" + label // scripts tell the members apart
	for i, kv := range req.Env {
		if strings.HasPrefix(kv, "RALPH_PROMPT_FILE=") {
			req.Env[i] = "RALPH_PROMPT_FILE=" + pf
		}
	}
	req.Env = append(req.Env, fmt.Sprintf("RALPH_COUNCIL_MEMBER=%d", m))
	res, err := choice.Agent.Run(ctx, req)
	if ctx.Err() != nil {
		fmt.Fprintf(tr, "\n[ralph] interrupted\n")
		return rec, ctx.Err()
	}
	switch {
	case err != nil:
		rec.Error = fmt.Sprintf("agent %s: %v", choice.Name, err)
	default:
		res = e.masked(res)
		_ = e.box.update(func(st *State) { st.addUsage(x.it.ID, res.Usage) })
		if res.Failed() {
			rec.Error = AgentFailure(res).Summary
		} else {
			vote := roles.ParseVote(res.FinalText)
			rec.Vote, rec.Reasons = vote.Decision, e.mask.String(vote.Reasons)
			if vote.Decision == roles.VoteAbstain {
				rec.Error = "its final message has no vote (a ```json {\"vote\": …} block or a VOTE: approve|reject line)"
			}
		}
	}
	rec.At = cfg.Clock.Now().UTC()
	fmt.Fprintf(tr, "\n[ralph] council member %d/%d votes %s\n", m, k, rec.Vote)
	if err := store.WriteJSON(filepath.Join(e.councilDir(it.ID), fmt.Sprintf("%04d-%d.json", cur.Iteration, m)), rec); err != nil {
		return rec, err
	}
	msg := fmt.Sprintf("%s: council member %d/%d (%s) votes %s", it.ID, m, k, choice.Name, rec.Vote)
	if rec.Error != "" {
		msg += ": " + rec.Error
	}
	e.emit(Event{Type: "council_vote", Iteration: cur.Iteration, Item: it.ID, Attempt: cur.Attempt, Message: msg,
		Data: map[string]any{"member": m, "of": k, "vote": rec.Vote, "agent": choice.Name, "transcript": tr.Path}})
	return rec, nil
}

// councilPrompt is a member's own prompt: the council role's text, then
// the item, the gates' verdict and where the work is.
func councilPrompt(text string, it *Item, v Verdict, base string, m, k int) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(text))
	fmt.Fprintf(&b, "\n\n---\n\nYou are council member %d of %d.\n\n## The %s: %s — %s\n\n", m, k, it.Kind, it.ID, it.Title)
	if d := strings.TrimSpace(it.Description); d != "" {
		b.WriteString(d + "\n\n")
	}
	if len(it.Criteria) > 0 {
		b.WriteString("Acceptance criteria:\n")
		for _, c := range it.Criteria {
			fmt.Fprintf(&b, "- %s\n", c)
		}
		b.WriteString("\n")
	}
	b.WriteString("## The work\n\n")
	if base != "" {
		fmt.Fprintf(&b, "The work began at commit %s: review `git log %s..HEAD`, `git diff %s` and the uncommitted changes (`git status`).\n", base, short(base), short(base))
	} else {
		b.WriteString("Review the uncommitted changes (`git status`, `git diff`) and the latest commits.\n")
	}
	fmt.Fprintf(&b, "The harness ran the quality gates on it: %s.\n", v.Summary)
	return b.String()
}

// oneLine folds s into one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + " …"
	}
	return s
}
