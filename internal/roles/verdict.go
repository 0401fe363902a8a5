package roles

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Decision is a reviewing role's verdict on the work.
type Decision string

const (
	Approve Decision = "approve"
	Changes Decision = "changes"
	// None: the final message carries no verdict.
	None Decision = ""
)

// Verdict is what a role's final message decided.
type Verdict struct {
	Decision Decision
	Findings string // the reviewer's findings, for the next iteration and progress
}

var (
	reviewLine = regexp.MustCompile(`(?im)^[ \t>*_` + "`" + `]*REVIEW:[ \t]*(approve|approved|changes|changes[ _]requested|request[ _]changes)[ \t*_` + "`" + `.]*$`)
	jsonFence  = regexp.MustCompile("(?s)```(?:json)?[ \\t]*\\n(\\{.*?\\})[ \\t]*\\n```")
)

// ParseVerdict reads the verdict of a final message. Two forms:
//
//   - a line `REVIEW: approve` or `REVIEW: changes`; the last one counts,
//     and the findings are the message before it;
//   - a fenced JSON block {"review": "approve"|"changes", "findings": …}
//     (findings a string or a list of strings); the last block with a
//     "review" key counts.
//
// Anything else — no verdict, an unknown word — is None: never an
// approval.
func ParseVerdict(final string) Verdict {
	var v Verdict
	at := -1
	if locs := reviewLine.FindAllStringSubmatchIndex(final, -1); len(locs) > 0 {
		m := locs[len(locs)-1]
		at = m[0]
		word := strings.ToLower(final[m[2]:m[3]])
		if strings.HasPrefix(word, "approve") {
			v.Decision = Approve
		} else {
			v.Decision = Changes
		}
		v.Findings = strings.TrimSpace(final[:m[0]])
	}
	if word, text, _, ok := lastBlock(final, "review", "findings", at); ok {
		switch word {
		case "approve", "approved":
			v.Decision = Approve
		case "changes", "request_changes", "changes_requested":
			v.Decision = Changes
		default:
			v.Decision = None
		}
		v.Findings = text
	}
	if len(v.Findings) > 4<<10 {
		v.Findings = v.Findings[:4<<10] + " …"
	}
	return v
}

// lastBlock finds the last fenced JSON block, starting at or after from,
// whose key holds a word: the word (lower case), the block's text field
// (or the message before the block when it has none) and where the block
// starts.
func lastBlock(final, key, textKey string, from int) (word, text string, at int, ok bool) {
	for _, m := range jsonFence.FindAllStringSubmatchIndex(final, -1) {
		if m[0] < from {
			continue // a verdict line after the block is the later word
		}
		var blk map[string]json.RawMessage
		var w string
		if json.Unmarshal([]byte(final[m[2]:m[3]]), &blk) != nil || json.Unmarshal(blk[key], &w) != nil || w == "" {
			continue
		}
		word, at, ok = strings.ToLower(strings.TrimSpace(w)), m[0], true
		if text = findingsText(blk[textKey]); text == "" {
			text = strings.TrimSpace(final[:m[0]])
		}
	}
	return word, text, at, ok
}

func findingsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		var b strings.Builder
		for _, f := range list {
			if f = strings.TrimSpace(f); f != "" {
				b.WriteString("- " + f + "\n")
			}
		}
		return strings.TrimSpace(b.String())
	}
	return ""
}

// Vote is a council member's vote: approve, reject, or an abstention when
// the message carries no vote ralph can read.
type Vote struct {
	Decision string // VoteApprove, VoteReject or VoteAbstain
	Reasons  string
}

// Vote decisions.
const (
	VoteApprove = "approve"
	VoteReject  = "reject"
	VoteAbstain = "abstain"
)

var voteLine = regexp.MustCompile(`(?im)^[ \t>*_` + "`" + `]*VOTE:[ \t]*(approve|approved|reject|rejected)[ \t*_` + "`" + `.]*$`)

// ParseVote reads a council member's vote from its final message: the
// last fenced JSON block with a "vote" key ({"vote": "approve"|"reject",
// "reasons": …}), or a line `VOTE: approve|reject` after it; a reviewer's
// `REVIEW: approve|changes` verdict is read as the same vote. Anything
// else is an abstention, never an approval.
func ParseVote(final string) Vote {
	v := Vote{Decision: VoteAbstain}
	at := -1
	if word, text, bat, ok := lastBlock(final, "vote", "reasons", -1); ok {
		at = bat
		switch word {
		case "approve", "approved":
			v.Decision = VoteApprove
		case "reject", "rejected":
			v.Decision = VoteReject
		default:
			v.Decision = VoteAbstain
		}
		v.Reasons = text
	}
	if locs := voteLine.FindAllStringSubmatchIndex(final, -1); len(locs) > 0 {
		if m := locs[len(locs)-1]; m[0] > at {
			at = m[0]
			v.Decision = VoteReject
			if strings.HasPrefix(strings.ToLower(final[m[2]:m[3]]), "approve") {
				v.Decision = VoteApprove
			}
			v.Reasons = strings.TrimSpace(final[:m[0]])
		}
	}
	if at < 0 {
		switch rv := ParseVerdict(final); rv.Decision {
		case Approve:
			v = Vote{Decision: VoteApprove, Reasons: rv.Findings}
		case Changes:
			v = Vote{Decision: VoteReject, Reasons: rv.Findings}
		}
	}
	if len(v.Reasons) > 4<<10 {
		v.Reasons = v.Reasons[:4<<10] + " …"
	}
	return v
}
