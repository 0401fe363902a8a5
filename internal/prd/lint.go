package prd

import (
	"fmt"
	"regexp"
	"strings"
)

// biteSized is the largest complexity a story may have and still be one
// iteration's work (bite-sized).
const biteSized = 2

// vague are words that make an acceptance criterion a matter of opinion
// unless a number pins them down ("fast" vs "under 200 ms").
var vague = regexp.MustCompile(`(?i)\b(works? (well|fine|correctly|properly)|properly|correctly|as expected|fast|faster|quick(ly)?|slow|efficient(ly)?|performant|scalable|robust|user[- ]friendly|intuitive|nice|good|better|clean|appropriate(ly)?|reasonable|seamless(ly)?|smooth(ly)?|easy|simple|handles? (it|errors) gracefully)\b`)

var digit = regexp.MustCompile(`[0-9]`)

// Lint flags what validation lets through but the "Ralph-ready"
// stories must not have: a story too big for one iteration (complexity
// above MaxComplexity), a story without acceptance criteria, and a
// criterion with no objective check (a vague word and no number). One
// line per finding, naming the story.
func (p *PRD) Lint() []string {
	var out []string
	for _, s := range p.Stories {
		if s.Complexity > biteSized {
			out = append(out, fmt.Sprintf("%s: complexity %d is above %d: split it into stories of one iteration each", s.ID, s.Complexity, biteSized))
		}
		if len(s.AcceptanceCriteria) == 0 {
			out = append(out, fmt.Sprintf("%s: no acceptance criteria: give checks a test or a command can decide", s.ID))
		}
		for _, c := range s.AcceptanceCriteria {
			if m := vague.FindString(c); m != "" && !digit.MatchString(c) {
				out = append(out, fmt.Sprintf("%s: acceptance criterion %q has no objective check (%q with no number): say what a test or a command would observe", s.ID, c, strings.ToLower(m)))
			}
		}
	}
	return out
}

// Canonical forgets the layout the document was read in: Marshal then
// writes the format's canonical layout, with the fields every story
// always carries ("passes" among them) — for a PRD written by a program,
// such as an agent's draft, that ralph writes out as its own file.
func (p *PRD) Canonical() {
	p.src = nil
	for i := range p.Stories {
		p.Stories[i].src = nil
	}
}
