package web

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/dashboard"
)

// The pictures are SVG drawn here, on the server, from the same data the
// API answers (/api/timeline, /api/dag, /api/cost): nothing to download,
// the same picture with or without JavaScript, and its marks are elements
// a test (or a screen reader) can find. Colours are the Okabe–Ito
// palette, which keeps its hues apart for the common kinds of colour
// blindness, and every colour has a glyph and a word beside it.

// look is how one outcome or status is drawn: its class (the colour, in
// the page's style), its glyph and its word.
type look struct{ Class, Glyph, Word string }

// outcomeLooks are the timeline's outcomes.
var outcomeLooks = map[string]look{
	dashboard.OutcomeRunning:     {"running", "▶", "running"},
	dashboard.OutcomePassed:      {"passed", "✓", "passed"},
	dashboard.OutcomeFailed:      {"failed", "✗", "failed"},
	dashboard.OutcomeBlocked:     {"blocked", "⊘", "failed, blocked"},
	dashboard.OutcomeProgress:    {"progress", "◐", "in progress (not claimed done)"},
	dashboard.OutcomeRateLimited: {"ratelimited", "◷", "rate limited"},
	dashboard.OutcomeWaiting:     {"waiting", "?", "waiting for an answer"},
	dashboard.OutcomePlan:        {"plan", "✎", "plan written"},
	dashboard.OutcomeInterrupted: {"interrupted", "‖", "interrupted"},
	dashboard.OutcomeDone:        {"done", "○", "done"},
}

// outcomeLook is the look of an outcome (an unknown one drawn as done).
func outcomeLook(o string) look {
	if l, ok := outcomeLooks[o]; ok {
		return l
	}
	return outcomeLooks[dashboard.OutcomeDone]
}

// statusLooks are the items' statuses (the DAG, the tables): the
// engine's (an item marked by hand among them), and two of the page's
// own (itemStatus).
var statusLooks = map[string]look{
	"passed":  {"passed", "✓", "passed"},
	"blocked": {"blocked", "⊘", "blocked"},
	"running": {"running", "▶", "running"},
	"pending": {"pending", "○", "pending"},
	"waiting": {"waiting", "✎", "plan awaits approval"},
	"earlier": {"passed", "✓", "passed before this run"},
	"marked":  {"waiting", "✋", "marked by hand, not verified"},
}

func statusLook(s string) look {
	if l, ok := statusLooks[s]; ok {
		return l
	}
	return look{"pending", "○", s}
}

// svgDefs are the patterns the pictures share: hatching that tells a
// failure or a wait apart without its colour.
const svgDefs = `<defs>` +
	`<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" class="hatch-bg"/><line x1="0" y1="0" x2="0" y2="6" class="hatch-line"/></pattern>` +
	`<pattern id="dots" width="6" height="6" patternUnits="userSpaceOnUse"><circle cx="3" cy="3" r="1.2" class="dot"/></pattern>` +
	`</defs>`

// svg builds an SVG element.
type svg struct{ strings.Builder }

func (b *svg) f(format string, args ...any) { fmt.Fprintf(b, format, args...) }

// html is the picture for a template.
func (b *svg) html() template.HTML { return template.HTML(b.String()) }

// esc escapes text and attribute values.
func esc(s string) string { return html.EscapeString(s) }

// px rounds a coordinate for the markup.
func px(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
}

// span is a duration for people: 950ms, 4.2s, 3m05s, 2h10m.
func span(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second).Seconds()))
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// tickStep is a round step that cuts d into about n parts.
func tickStep(d time.Duration, n int) time.Duration {
	for _, s := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour} {
		if d/s <= time.Duration(n) {
			return s
		}
	}
	return 24 * time.Hour
}

// niceMax is a round number at or above v, for a value axis, with its
// step (about four ticks).
func niceMax(v float64) (top, step float64) {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1, 0.25
	}
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= v {
			top = m * mag
			break
		}
	}
	return top, top / 4
}

// timeScale maps times to x: user units, or with unit "%" percents of
// the picture's width (the timeline: its text keeps its size on any
// screen).
type timeScale struct {
	from   time.Time
	d      time.Duration
	x0, x1 float64
	unit   string
}

// at is an x for the markup.
func (s timeScale) at(x float64) string { return px(x) + s.unit }

func (s timeScale) x(t time.Time) float64 {
	if s.d <= 0 {
		return s.x0
	}
	f := float64(t.Sub(s.from)) / float64(s.d)
	return s.x0 + math.Max(0, math.Min(1, f))*(s.x1-s.x0)
}

// axis draws the time axis's ticks and labels (time since the start)
// from y down to bottom, the labels above y (a timeline) or, with
// below, under bottom (a chart).
func (s timeScale) axis(b *svg, y, bottom float64, below bool) {
	step := max(tickStep(s.d, 8), s.d/12) // a span of years still draws a dozen ticks
	for i := time.Duration(0); i <= 12 && i*step <= s.d; i++ {
		t := i * step
		x := s.x0 + float64(t)/float64(max(s.d, 1))*(s.x1-s.x0)
		b.f(`<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, s.at(x), px(y), s.at(x), px(bottom))
		ly := y - 4
		if below {
			ly = bottom + 13
		}
		b.f(`<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, s.at(x), px(ly), esc(tickLabel(t)))
	}
}

// tickLabel is a time since the start on an axis: 0, 30s, 2m, 1h30m.
func tickLabel(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour && d%time.Minute == 0:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// clipText shortens s to n characters.
func clipText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:max(n-1, 1)]) + "…"
	}
	return s
}
