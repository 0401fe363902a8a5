package plan

import (
	"slices"
	"testing"

	"github.com/ralph-loop/ralph/internal/prd"
)

// A PRD written as a plan reads back as the same work.
func TestMarkdownRoundTrip(t *testing.T) {
	doc := &prd.PRD{Feature: "Subtraction", QualityChecks: prd.QualityChecks{Test: "go test ./...", Lint: "go vet ./..."},
		Stories: []prd.Story{
			{ID: "US-001", Title: "Sub", Description: "Add Sub(a, b).", AcceptanceCriteria: []string{"Sub(3, 1) is 2", "a table test"}, Checks: []string{"go test ./calc -run TestSub"}, Priority: 1},
			{ID: "US-002", Title: "CLI sub", AcceptanceCriteria: []string{"calc sub 3 1 prints 2"}, DependsOn: []string{"US-001"}, Priority: 2},
		}}
	p, err := Parse("plan.md", Markdown(doc))
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "Subtraction" || len(p.Items) != 2 || p.Flat {
		t.Fatalf("plan = %+v", p)
	}
	if it := p.Items[0]; it.Title != "Sub" || !slices.Equal(it.Criteria, []string{"Sub(3, 1) is 2", "a table test"}) {
		t.Errorf("task 1 = %+v", it)
	}
	var cmds []string
	for _, g := range p.Gates {
		cmds = append(cmds, g.Command)
	}
	if !slices.Equal(cmds, []string{"go vet ./...", "go test ./..."}) {
		t.Errorf("validation commands = %v", cmds)
	}
}
