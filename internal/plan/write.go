package plan

import (
	"fmt"
	"strings"

	"github.com/ralph-loop/ralph/internal/prd"
)

// Markdown renders a PRD as a plan in ralphex's form, the form Parse
// reads: a title, the quality checks as Validation Commands, and a
// `### Task N: title` section per story in priority order, its
// description, dependencies and checks as text and its acceptance
// criteria as boxes.
func Markdown(doc *prd.PRD) []byte {
	var b strings.Builder
	title := strings.TrimSpace(doc.Feature)
	if title == "" {
		title = strings.TrimSpace(doc.Project)
	}
	fmt.Fprintf(&b, "# %s\n", oneLine(title))
	if d := strings.TrimSpace(doc.Description); d != "" {
		fmt.Fprintf(&b, "\n%s\n", d)
	}
	if gates := doc.QualityChecks.Gates(); len(gates) > 0 {
		b.WriteString("\n## Validation Commands\n\n```bash\n")
		for _, g := range gates {
			fmt.Fprintf(&b, "%s\n", g.Command)
		}
		b.WriteString("```\n")
	}
	for i, s := range doc.Stories {
		fmt.Fprintf(&b, "\n### Task %d: %s\n", i+1, oneLine(s.Title))
		if d := strings.TrimSpace(s.Description); d != "" {
			fmt.Fprintf(&b, "\n%s\n", d)
		}
		if len(s.DependsOn) > 0 {
			fmt.Fprintf(&b, "\nAfter: %s.\n", strings.Join(s.DependsOn, ", "))
		}
		for _, c := range s.Checks {
			fmt.Fprintf(&b, "\nCheck: `%s`\n", c)
		}
		b.WriteString("\n")
		for _, c := range s.AcceptanceCriteria {
			fmt.Fprintf(&b, "- [ ] %s\n", oneLine(c))
		}
		if len(s.AcceptanceCriteria) == 0 {
			fmt.Fprintf(&b, "- [ ] %s\n", oneLine(s.Title))
		}
	}
	return []byte(b.String())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
