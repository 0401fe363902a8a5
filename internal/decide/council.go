package decide

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/roles"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// councilRole is the role whose text a council member's prompt carries and
// whose roles.yaml agent entry runs it.
const councilRole = "council"

// council puts a claim that passed its gates to a vote when the item is
// critical (its critical field, or a council rule in roles.yaml): Members
// reviewers, each its own agent process with its own prompt and
// transcript, one after another in the item's tree. A majority of
// approvals lets the item go on to be committed; otherwise the claim
// fails with the members' reasons as the next iteration's context.
type council struct {
	Members int
	Roles   *roles.Set
}

// voteRecord is one council member's vote as saved under
// .ralph/council/<item>/<iteration>-<member>.json.
type voteRecord struct {
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

// Turn never claims an iteration: the council votes within one.
func (c council) Turn(*engine.Item, engine.ItemState) (engine.Turn, bool, error) {
	return engine.Turn{}, false, nil
}

// Decide runs the vote on a passing claim of an item that needs one. Each
// vote is saved before the next member starts.
func (c council) Decide(ctx context.Context, x engine.View, v engine.Verdict) (engine.Decision, error) {
	if !v.Passed {
		return next, nil
	}
	why, err := c.why(x)
	if err != nil || why == "" {
		return next, err
	}
	f, k := x.Facts(), c.Members
	it := f.Item
	x.Emit(event(x, "council_started", fmt.Sprintf("%s passed its gates and needs a council (%s): %s vote, a majority must approve", it.ID, why, engine.Plural(k, "member")),
		map[string]any{"members": k, "why": why}))
	text, err := c.Roles.Text(councilRole)
	if err != nil {
		return next, usage.Errorf("%v", err)
	}
	base := x.Record().BaseHead
	var votes []voteRecord
	n := map[string]int{}
	for m := 1; m <= k; m++ {
		rec, err := c.member(ctx, x, v, text, base, m)
		if err != nil {
			return next, err
		}
		votes = append(votes, rec)
		n[rec.Vote]++
	}
	approved := 2*n[roles.VoteApprove] > k
	tally := fmt.Sprintf("%d approve, %d reject, %d abstain of %d", n[roles.VoteApprove], n[roles.VoteReject], n[roles.VoteAbstain], k)
	decided := "approved"
	if !approved {
		decided = "rejected"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s · %s %s · iteration %d · Council (%s)\n\n- Decision: %s (%s)\n", x.Now().Format(time.RFC3339), it.Kind, it.ID, f.Iteration, why, decided, tally)
	for _, r := range votes {
		fmt.Fprintf(&b, "- Member %d (%s): %s", r.Member, r.Agent, r.Vote)
		if r.Reasons != "" {
			fmt.Fprintf(&b, ": %s", oneLine(r.Reasons, 300))
		} else if r.Error != "" {
			fmt.Fprintf(&b, " (%s)", r.Error)
		}
		b.WriteString("\n")
	}
	x.Note(b.String())
	x.Emit(event(x, "council_decided", fmt.Sprintf("%s: the council %s it (%s)", it.ID, decided, tally),
		map[string]any{"approved": approved, "approve": n[roles.VoteApprove], "reject": n[roles.VoteReject], "abstain": n[roles.VoteAbstain], "members": k}))
	if approved {
		return next, nil
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
	rejection := strings.TrimSpace(r.String())
	return engine.Decision{Action: engine.Fail, Status: "rejected by the council", Findings: rejection,
		Verdict: engine.Verdict{Claimed: true, Gates: v.Gates, Summary: "the council did not approve it (" + tally + ")", Failure: rejection}}, nil
}

// why says why an item needs a council's majority ("" when it does not):
// its critical field, or the first council rule that holds.
func (c council) why(x engine.View) (string, error) {
	if x.Facts().Item.Critical {
		return "critical: true", nil
	}
	if c.Roles == nil || len(c.Roles.Council) == 0 {
		return "", nil
	}
	t, err := c.Roles.CouncilRule(x.RoleEnv())
	if err != nil {
		return "", usage.Errorf("%v", err)
	}
	if t == nil {
		return "", nil
	}
	return x.Why(t), nil
}

// member runs member m and saves its vote. A member whose run fails or
// whose message has no readable vote abstains; only a cancelled run is an
// error.
func (c council) member(ctx context.Context, x engine.View, v engine.Verdict, text, base string, m int) (voteRecord, error) {
	f, k := x.Facts(), c.Members
	it := f.Item
	rec := voteRecord{Item: it.ID, Iteration: f.Iteration, Member: m, Of: k, Vote: roles.VoteAbstain}
	ran, err := x.RunAgent(ctx, engine.AgentRun{Role: councilRole, Label: fmt.Sprintf("council-%d", m), Title: fmt.Sprintf("council member %d/%d", m, k),
		Run: m, Prompt: prompt(text, it, v, base, m, k), Env: []string{fmt.Sprintf("RALPH_COUNCIL_MEMBER=%d", m)}})
	if err != nil {
		return rec, err
	}
	defer ran.Log.Close()
	rec.Agent, rec.Model, rec.Transcript = ran.Agent.Name, ran.Agent.Model, ran.Transcript
	switch res := ran.Result; {
	case ran.Err != nil:
		rec.Error = fmt.Sprintf("agent %s: %v", ran.Agent.Name, ran.Err)
	case res.Failed():
		rec.Error = engine.AgentFailure(res).Summary
	default:
		vote := roles.ParseVote(res.FinalText)
		rec.Vote, rec.Reasons = vote.Decision, vote.Reasons
		if vote.Decision == roles.VoteAbstain {
			rec.Error = "its final message has no vote (a ```json {\"vote\": …} block or a VOTE: approve|reject line)"
		}
	}
	rec.At = x.Now()
	fmt.Fprintf(ran.Log, "\n[ralph] council member %d/%d votes %s\n", m, k, rec.Vote)
	if err := store.WriteJSON(filepath.Join(x.ItemDir("council"), fmt.Sprintf("%04d-%d.json", f.Iteration, m)), rec); err != nil {
		return rec, err
	}
	msg := fmt.Sprintf("%s: council member %d/%d (%s) votes %s", it.ID, m, k, ran.Agent.Name, rec.Vote)
	if rec.Error != "" {
		msg += ": " + rec.Error
	}
	x.Emit(event(x, "council_vote", msg, map[string]any{"member": m, "of": k, "vote": rec.Vote, "agent": ran.Agent.Name, "transcript": ran.Transcript}))
	return rec, nil
}

// prompt is a member's own prompt: the council role's text, then the
// item, the gates' verdict and where the work is.
func prompt(text string, it *engine.Item, v engine.Verdict, base string, m, k int) string {
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
		fmt.Fprintf(&b, "The work began at commit %s: review `git log %s..HEAD`, `git diff %s` and the uncommitted changes (`git status`).\n", base, engine.ShortSHA(base), engine.ShortSHA(base))
	} else {
		b.WriteString("Review the uncommitted changes (`git status`, `git diff`) and the latest commits.\n")
	}
	fmt.Fprintf(&b, "The harness ran the quality gates on it: %s.\n", v.Summary)
	return b.String()
}
