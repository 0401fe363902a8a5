package prd

import (
	"strings"
	"time"
	"unicode"
)

// now is replaced in tests so templates are reproducible.
var now = time.Now

// Template is the PRD that `ralph prd new` writes: a valid snake_case PRD with one
// example story, meant to be edited by a person or an agent. Every field is
// written, even empty ones, so the file shows what can be filled in.
func Template(project, feature string) *PRD {
	ts := now().UTC().Format(time.RFC3339)
	return &PRD{
		Format:     formatSnake,
		Project:    project,
		Feature:    feature,
		BranchName: "feature/" + Slug(feature),
		Version:    "1.0",
		Stories: []Story{{
			ID:          "US-001",
			Title:       "First user story",
			Description: "As a user, I want ... so that ...",
			AcceptanceCriteria: []string{
				"Describe an observable result",
				"All quality checks pass",
			},
			Priority:   1,
			Complexity: 3,
		}},
		CreatedAt: ts,
		UpdatedAt: ts,
	}
}

// Slug makes a git-branch-safe name: lower case letters and digits joined by
// single dashes ("Task Priorities!" -> "task-priorities"), at most
// maxSlug characters, as it names a branch and a run folder. An empty
// result becomes "prd" so the branch name is never just "feature/".
func Slug(s string) string {
	const maxSlug = 60
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		} else {
			dash = true
		}
	}
	if b.Len() == 0 {
		return "prd"
	}
	out := b.String()
	if len(out) > maxSlug {
		out = strings.TrimRight(out[:maxSlug], "-")
	}
	return out
}
