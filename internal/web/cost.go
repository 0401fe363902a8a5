package web

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/agent"
	"github.com/ralph-loop/ralph/internal/dashboard"
	"github.com/ralph-loop/ralph/internal/engine"
)

// costAnswer is /api/cost: what the agents spent, over time and by agent
// and role, the budget (--max-cost, --max-tokens), and the stories passed
// against time.
type costAnswer struct {
	Start      time.Time   `json:"start"`
	End        time.Time   `json:"end"`
	Total      agent.Usage `json:"total"`
	BudgetUSD  float64     `json:"budget_usd,omitempty"`
	BudgetTok  int64       `json:"budget_tokens,omitempty"`
	ByAgent    []spend     `json:"by_agent"`
	ByRole     []spend     `json:"by_role"`
	Points     []spendAt   `json:"points"`
	Passes     []passAt    `json:"passes"`
	PassedBase int         `json:"passed_before_run"`
	Stories    int         `json:"stories"`
}

// spend is what one agent or role spent.
type spend struct {
	Name       string  `json:"name"`
	Iterations int     `json:"iterations"`
	Input      int64   `json:"input_tokens"`
	Output     int64   `json:"output_tokens"`
	CostUSD    float64 `json:"cost_usd"`
}

// spendAt is one agent run's spending, with the run's totals after it.
type spendAt struct {
	Time      time.Time `json:"time"`
	Iteration int       `json:"iteration"`
	Agent     string    `json:"agent"`
	Role      string    `json:"role"`
	Tokens    int64     `json:"tokens"`
	CostUSD   float64   `json:"cost_usd"`
	SumTokens int64     `json:"total_tokens"`
	SumCost   float64   `json:"total_cost_usd"`
}

// passAt is a story passing, with the count passed after it.
type passAt struct {
	Time   time.Time `json:"time"`
	Item   string    `json:"item"`
	Passed int       `json:"passed"`
}

func cost(snap dashboard.Snapshot, now time.Time) costAnswer {
	a := costAnswer{ByAgent: []spend{}, ByRole: []spend{}, Points: []spendAt{}, Passes: []passAt{}}
	h, st := snap.History, snap.State
	if h == nil || st == nil {
		return a
	}
	a.Start, a.End = runStart(snap), h.Last
	if snap.Active && now.After(a.End) {
		a.End = now
	}
	if a.End.Before(a.Start) {
		a.End = a.Start
	}
	a.Total, a.BudgetUSD, a.BudgetTok = st.Usage, st.MaxCost, st.MaxTokens
	byAgent, byRole := map[string]*spend{}, map[string]*spend{}
	add := func(m map[string]*spend, name string, u agent.Usage) {
		s := m[name]
		if s == nil {
			s = &spend{Name: name}
			m[name] = s
		}
		s.Iterations++
		s.Input += u.InputTokens
		s.Output += u.OutputTokens
		s.CostUSD += u.CostUSD
	}
	var sumTok int64
	var sumCost float64
	its := append([]dashboard.Iteration(nil), h.Iterations...)
	sort.SliceStable(its, func(i, j int) bool { return spentAt(its[i]).Before(spentAt(its[j])) })
	for _, it := range its {
		if it.AgentEnd.IsZero() {
			continue
		}
		name := it.Agent
		if name == "" {
			name = st.Agent
		}
		add(byAgent, name, it.Usage)
		add(byRole, it.Role, it.Usage)
		tok := it.Usage.InputTokens + it.Usage.OutputTokens
		sumTok += tok
		sumCost += it.Usage.CostUSD
		a.Points = append(a.Points, spendAt{Time: it.AgentEnd, Iteration: it.Number, Agent: name, Role: it.Role, Tokens: tok, CostUSD: it.Usage.CostUSD, SumTokens: sumTok, SumCost: sumCost})
	}
	a.ByAgent, a.ByRole = sorted(byAgent), sorted(byRole)
	for _, id := range st.Order {
		if st.Items[id].PassedBefore() {
			a.PassedBase++
		}
	}
	a.Stories = st.Total()
	n := a.PassedBase
	for _, p := range h.Passes {
		n++
		a.Passes = append(a.Passes, passAt{Time: p.Time, Item: p.Item, Passed: n})
	}
	return a
}

// spentAt is when an iteration's spending is known: its agent's end.
func spentAt(it dashboard.Iteration) time.Time {
	if it.AgentEnd.IsZero() {
		return it.Start
	}
	return it.AgentEnd
}

func sorted(m map[string]*spend) []spend {
	out := make([]spend, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CostUSD != out[j].CostUSD {
			return out[i].CostUSD > out[j].CostUSD
		}
		if ti, tj := out[i].Input+out[i].Output, out[j].Input+out[j].Output; ti != tj {
			return ti > tj
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Drawing the two charts, side by side.
const (
	chartW   = 560.0
	chartH   = 220.0
	chartL   = 52.0 // the value axis
	chartR   = 12.0
	chartTop = 18.0
	chartBot = 30.0
)

// series are the agents' lines in the spending chart, by the palette's
// order.
var seriesClasses = []string{"s0", "s1", "s2", "s3", "s4"}

// spendSVG draws the spending over time: the run's total and one line
// per agent when there are several, in dollars when the agents report a
// cost, else in tokens; the budget as a dashed line.
func spendSVG(a costAnswer) *svg {
	b := &svg{}
	b.f(`<svg id="spend-svg" class="chart spend" viewBox="0 0 %s %s" role="img" aria-labelledby="spend-title" xmlns="http://www.w3.org/2000/svg">`, px(chartW), px(chartH))
	dollars := a.Total.CostUSD > 0 || a.BudgetUSD > 0
	unit, budget := "tokens", float64(a.BudgetTok)
	val := func(p spendAt) float64 { return float64(p.SumTokens) }
	if dollars {
		unit, budget = "USD", a.BudgetUSD
		val = func(p spendAt) float64 { return p.SumCost }
	}
	b.f(`<title id="spend-title">Spending over time, in %s</title>`, unit)
	if len(a.Points) == 0 || (val(a.Points[len(a.Points)-1]) == 0 && budget == 0) {
		// Nothing to draw: the agents (a plain command, say) report no
		// usage.
		b.f(`<text class="empty" x="%s" y="%s" text-anchor="middle">no tokens or cost reported by the agents yet</text></svg>`, px(chartW/2), px(chartH/2))
		return b
	}
	top, step := niceMax(max(val(a.Points[len(a.Points)-1]), budget) * 1.05)
	sc := timeScale{from: a.Start, d: a.End.Sub(a.Start), x0: chartL, x1: chartW - chartR}
	y := func(v float64) float64 { return chartH - chartBot - v/top*(chartH-chartBot-chartTop) }
	valueAxis(b, top, step, y, func(v float64) string {
		if dollars {
			return fmt.Sprintf("$%.2f", v)
		}
		return dashboard.Tokens(int64(v))
	})
	sc.axis(b, chartTop, chartH-chartBot, true)
	b.f(`<text class="tick" x="%s" y="%s" text-anchor="end">time since the start</text>`, px(chartW-chartR), px(chartH-3))
	if budget > 0 {
		b.f(`<line class="budget" x1="%s" y1="%s" x2="%s" y2="%s"><title>budget %s</title></line>`, px(chartL), px(y(budget)), px(chartW-chartR), px(y(budget)), esc(money(budget, dollars)))
		b.f(`<text class="budget-label" x="%s" y="%s" text-anchor="end">budget %s</text>`, px(chartW-chartR-2), px(y(budget)-4), esc(money(budget, dollars)))
	}
	// One line per agent (when several), and the total.
	if len(a.ByAgent) > 1 {
		for i, s := range a.ByAgent {
			if i >= len(seriesClasses) {
				break
			}
			var sum float64
			pts := []string{fmt.Sprintf("%s,%s", px(sc.x(a.Start)), px(y(0)))}
			for _, p := range a.Points {
				if p.Agent != s.Name {
					continue
				}
				if dollars {
					sum += p.CostUSD
				} else {
					sum += float64(p.Tokens)
				}
				pts = append(pts, fmt.Sprintf("%s,%s", px(sc.x(p.Time)), px(y(sum))))
			}
			b.f(`<polyline class="series %s" points="%s"><title>%s</title></polyline>`, seriesClasses[i], strings.Join(pts, " "), esc(s.Name))
		}
	}
	pts := []string{fmt.Sprintf("%s,%s", px(sc.x(a.Start)), px(y(0)))}
	for _, p := range a.Points {
		pts = append(pts, fmt.Sprintf("%s,%s", px(sc.x(p.Time)), px(y(val(p)))))
	}
	last := a.Points[len(a.Points)-1]
	pts = append(pts, fmt.Sprintf("%s,%s", px(sc.x(a.End)), px(y(val(last)))))
	b.f(`<polyline class="series total" points="%s"><title>all agents</title></polyline>`, strings.Join(pts, " "))
	if val(last) == 0 {
		b.f(`<text class="empty" x="%s" y="%s" text-anchor="middle">the agents reported no %s</text>`, px((chartL+chartW-chartR)/2), px(y(0)-10), unit)
	}
	for _, p := range a.Points {
		b.f(`<circle class="point" cx="%s" cy="%s" r="2.5"><title>iteration %d (%s, %s): %s, %s in all</title></circle>`, px(sc.x(p.Time)), px(y(val(p))), p.Iteration, esc(p.Agent), esc(p.Role),
			esc(spent(p.Tokens, p.CostUSD)), esc(money(val(p), dollars)))
	}
	b.WriteString(`</svg>`)
	return b
}

// passedSVG draws the stories passed against time, up to the total.
func passedSVG(a costAnswer) *svg {
	b := &svg{}
	b.f(`<svg id="passed-svg" class="chart passed-chart" viewBox="0 0 %s %s" role="img" aria-labelledby="passed-title" xmlns="http://www.w3.org/2000/svg">`, px(chartW), px(chartH))
	b.f(`<title id="passed-title">Stories passed against time: %d of %d</title>`, a.PassedBase+len(a.Passes), a.Stories)
	if a.Stories == 0 || a.End.IsZero() {
		b.f(`<text class="empty" x="%s" y="%s" text-anchor="middle">nothing to pass yet</text></svg>`, px(chartW/2), px(chartH/2))
		return b
	}
	top := float64(a.Stories)
	step := max(1, float64(int(top/4)))
	sc := timeScale{from: a.Start, d: a.End.Sub(a.Start), x0: chartL, x1: chartW - chartR}
	y := func(v float64) float64 { return chartH - chartBot - v/top*(chartH-chartBot-chartTop) }
	valueAxis(b, top, step, y, func(v float64) string { return fmt.Sprint(int(v)) })
	sc.axis(b, chartTop, chartH-chartBot, true)
	b.f(`<text class="tick" x="%s" y="%s" text-anchor="end">time since the start</text>`, px(chartW-chartR), px(chartH-3))
	b.f(`<line class="goal" x1="%s" y1="%s" x2="%s" y2="%s"><title>all %d stories</title></line>`, px(chartL), px(y(top)), px(chartW-chartR), px(y(top)), a.Stories)
	n := float64(a.PassedBase)
	pts := []string{fmt.Sprintf("%s,%s", px(sc.x(a.Start)), px(y(n)))}
	for _, p := range a.Passes {
		x := px(sc.x(p.Time))
		pts = append(pts, fmt.Sprintf("%s,%s", x, px(y(n))), fmt.Sprintf("%s,%s", x, px(y(float64(p.Passed)))))
		n = float64(p.Passed)
	}
	pts = append(pts, fmt.Sprintf("%s,%s", px(sc.x(a.End)), px(y(n))))
	b.f(`<polyline class="series passes" points="%s"/>`, strings.Join(pts, " "))
	for _, p := range a.Passes {
		b.f(`<circle class="point pass" cx="%s" cy="%s" r="3"><title>%s passed at %s (%d of %d)</title></circle>`, px(sc.x(p.Time)), px(y(float64(p.Passed))), esc(p.Item),
			esc(tickLabel(p.Time.Sub(a.Start).Round(time.Second))), p.Passed, a.Stories)
	}
	b.WriteString(`</svg>`)
	return b
}

// valueAxis draws the value ticks of a chart.
func valueAxis(b *svg, top, step float64, y func(float64) float64, label func(float64) string) {
	for v := 0.0; v <= top+step/1000; v += step {
		b.f(`<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, px(chartL), px(y(v)), px(chartW-chartR), px(y(v)))
		b.f(`<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, px(chartL-4), px(y(v)+4), esc(label(v)))
	}
}

func money(v float64, dollars bool) string {
	if dollars {
		return fmt.Sprintf("$%.2f", v)
	}
	return dashboard.Tokens(int64(v)) + " tokens"
}

// spent is one iteration's spending for people.
func spent(tokens int64, usd float64) string {
	s := dashboard.Tokens(tokens) + " tokens"
	if usd > 0 {
		s += fmt.Sprintf(", $%.2f", usd)
	}
	return s
}

// usageLine is the run's spending in one line, with its budget.
func usageLine(st *engine.State) string {
	u := st.Usage
	if u.InputTokens+u.OutputTokens == 0 && u.CostUSD == 0 && st.MaxCost == 0 {
		return ""
	}
	s := spent(u.InputTokens+u.OutputTokens, u.CostUSD)
	if st.MaxCost > 0 {
		s += fmt.Sprintf(" of a $%.2f budget", st.MaxCost)
	}
	return s
}
