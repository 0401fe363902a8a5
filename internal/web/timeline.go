package web

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/dashboard"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/schedule"
)

// timelineAnswer is /api/timeline: the run's iterations on their worker
// slots (and, in a coordinator's run, on their worker machines), the
// waits, and the best schedule of the DAG with the times the stories
// took.
type timelineAnswer struct {
	Start time.Time `json:"start"`
	// End is the picture's right edge: now while the run is active, else
	// its last event (or the best schedule's end, when later).
	End    time.Time        `json:"end"`
	Active bool             `json:"active"`
	Slots  int              `json:"slots"`
	Rows   []timelineRow    `json:"rows"`
	Bars   []timelineBar    `json:"iterations"`
	Waits  []dashboard.Wait `json:"waits"`
	Best   *bestSchedule    `json:"best,omitempty"`
}

// timelineRow is one row of bars: a worker slot of this machine, or of a
// worker machine.
type timelineRow struct {
	Name   string `json:"name"`
	Worker string `json:"worker,omitempty"`
}

// timelineBar is one iteration on the timeline.
type timelineBar struct {
	dashboard.Iteration
	Row         int   `json:"row"`
	MaxAttempts int   `json:"max_attempts,omitempty"`
	DurationMS  int64 `json:"duration_ms"`
	AgentMS     int64 `json:"agent_ms"`
	GateMS      int64 `json:"gate_ms"`
	Tokens      int64 `json:"tokens"`
}

// bestSchedule is the shortest time to done the DAG allows on the run's
// slots with the times its stories took (schedule.LowerBound): the
// critical path or the work shared evenly, whichever is longer. A story
// that has not run yet is counted at the median time of those that did
// (Estimated says how many).
type bestSchedule struct {
	Workers        int       `json:"workers"`
	BoundMS        int64     `json:"bound_ms"`
	CriticalPathMS int64     `json:"critical_path_ms"`
	WorkMS         int64     `json:"work_ms"`
	At             time.Time `json:"at"`
	Estimated      int       `json:"estimated"`
	// TookMS is the run's own time so far (to its last event, or now).
	TookMS int64 `json:"took_ms"`
}

// timeline builds the answer from a snapshot at now.
func timeline(snap dashboard.Snapshot, now time.Time) timelineAnswer {
	a := timelineAnswer{Active: snap.Active, Rows: []timelineRow{}, Bars: []timelineBar{}, Waits: []dashboard.Wait{}, Slots: 1}
	h, st := snap.History, snap.State
	if h == nil || st == nil {
		return a
	}
	a.Start = runStart(snap)
	a.Slots = max(st.Parallel, 1)
	a.End = h.Last
	if snap.Active && now.After(a.End) {
		a.End = now
	}
	if a.End.Before(a.Start) {
		a.End = a.Start
	}
	if !snap.Active {
		now = a.End // what still waits (an answer) waits until the last event
	}
	a.Waits = append(a.Waits, h.Waits...)
	// Rows: this machine's slots, then each worker machine's; a bar goes
	// to the first row of its machine that is free when it starts.
	type lane struct {
		worker string
		busy   time.Time
	}
	var lanes []lane
	lastRow := map[string]int{}
	byWorker := map[string]int{}
	for _, it := range h.Iterations {
		byWorker[it.Worker]++
	}
	if byWorker[""] > 0 || len(byWorker) == 0 {
		for i := 0; i < a.Slots; i++ {
			lanes = append(lanes, lane{})
		}
	}
	for _, it := range h.Iterations {
		slotEnd := it.SlotEnd
		if slotEnd.IsZero() {
			slotEnd = now
		}
		// The row of the item's last iteration when it is free (a retry
		// reads on from its failure), else the first free one.
		row := -1
		if r, ok := lastRow[it.Item]; ok && lanes[r].worker == it.Worker && !lanes[r].busy.After(it.Start) {
			row = r
		}
		for i, l := range lanes {
			if row < 0 && l.worker == it.Worker && !l.busy.After(it.Start) {
				row = i
			}
		}
		if row < 0 {
			// A new lane, after the last of its machine's.
			at := len(lanes)
			for i := len(lanes) - 1; i >= 0; i-- {
				if lanes[i].worker == it.Worker {
					at = i + 1
					break
				}
			}
			lanes = append(lanes[:at], append([]lane{{worker: it.Worker}}, lanes[at:]...)...)
			for i := range a.Bars {
				if a.Bars[i].Row >= at {
					a.Bars[i].Row++
				}
			}
			for item, r := range lastRow {
				if r >= at {
					lastRow[item] = r + 1
				}
			}
			row = at
		}
		lanes[row].busy = slotEnd
		lastRow[it.Item] = row
		a.Bars = append(a.Bars, newBar(it, row, st.MaxAttempts, now))
	}
	n := map[string]int{}
	for _, l := range lanes {
		n[l.worker]++
		name := fmt.Sprintf("slot %d", n[l.worker])
		if l.worker != "" {
			name = fmt.Sprintf("%s · %d", strings.SplitN(l.worker, " on ", 2)[0], n[l.worker])
		}
		a.Rows = append(a.Rows, timelineRow{Name: name, Worker: l.worker})
	}
	a.Best = best(snap, a.Slots, a.Start, now)
	if a.Best != nil && a.Best.At.After(a.End) {
		a.End = a.Best.At
	}
	return a
}

// runStart is when the run began: its first start event, its state's
// start, or its first iteration's.
func runStart(snap dashboard.Snapshot) time.Time {
	t := snap.History.Start
	if st := snap.State.StartedAt; !st.IsZero() && (t.IsZero() || st.Before(t)) {
		t = st
	}
	if its := snap.History.Iterations; len(its) > 0 && (t.IsZero() || its[0].Start.Before(t)) {
		t = its[0].Start
	}
	return t
}

// newBar is an iteration with its row and its times in milliseconds.
func newBar(it dashboard.Iteration, row, maxAttempts int, now time.Time) timelineBar {
	b := timelineBar{Iteration: it, Row: row, MaxAttempts: maxAttempts, DurationMS: it.Duration(now).Milliseconds(), Tokens: it.Usage.InputTokens + it.Usage.OutputTokens}
	if !it.AgentEnd.IsZero() {
		b.AgentMS = it.AgentEnd.Sub(it.Start).Milliseconds()
	}
	for _, g := range it.Gates {
		b.GateMS += g.DurationMS
	}
	return b
}

// best is the DAG's best schedule with the stories' measured times, or
// nil before any story has taken time.
func best(snap dashboard.Snapshot, slots int, start, now time.Time) *bestSchedule {
	took := map[string]time.Duration{}
	var end time.Time
	for _, it := range snap.History.Iterations {
		e := it.SlotEnd
		if e.IsZero() {
			e = now
		}
		took[it.Item] += e.Sub(it.Start)
		if !it.End.IsZero() && it.End.After(end) {
			end = it.End
		}
	}
	if len(took) == 0 {
		return nil
	}
	var measured []time.Duration
	for _, d := range took {
		measured = append(measured, d)
	}
	sort.Slice(measured, func(i, j int) bool { return measured[i] < measured[j] })
	median := measured[len(measured)/2]
	st := snap.State
	b := &bestSchedule{Workers: slots}
	var stories []schedule.Story
	for _, id := range st.Order {
		is := st.Items[id]
		d, ok := took[id]
		switch {
		case ok:
		case is.PassedBefore():
			continue // done before the run: no work of it
		default:
			d = median
			b.Estimated++
		}
		stories = append(stories, schedule.Story{ID: id, Deps: snap.DependsOn[id], Dur: d})
	}
	bound := schedule.LowerBound(stories, slots)
	b.BoundMS, b.CriticalPathMS, b.WorkMS = bound.Milliseconds(), schedule.CriticalPath(stories).Milliseconds(), schedule.TotalWork(stories).Milliseconds()
	b.At = start.Add(bound)
	if snap.Active {
		end = now
	}
	b.TookMS = end.Sub(start).Milliseconds()
	return b
}

// Drawing the timeline: the rows' names in a column of their own, the
// plot an SVG whose x are percents of its width, so that its text keeps
// its size and the whole run fits a phone's screen as it does a wide
// one.
const (
	tlTop = 22.0 // the axis
	tlRow = 28.0
	tlBar = 18.0
)

// timelineSVG draws the answer: a row per slot, a bar per iteration
// (its gates' time darker inside it, its merge-queue wait a thin line
// after it), the waits as hatched bands, the best schedule's end as a
// faint dashed line. Each bar's <title> is its hover text.
func timelineSVG(a timelineAnswer, repo int) *svg {
	b := &svg{}
	rows := max(len(a.Rows), 1)
	bottom := tlTop + float64(rows)*tlRow
	height := bottom + 22
	b.f(`<div class="tl"><div class="tl-names" style="padding-top:%spx">`, px(tlTop))
	for _, r := range a.Rows {
		b.f(`<div class="row-name" style="height:%spx;line-height:%spx" title="%s">%s</div>`, px(tlRow), px(tlRow), esc(r.Worker), esc(r.Name))
	}
	b.f(`</div><div class="tl-plot"><svg id="timeline-svg" class="chart timeline" width="100%%" height="%s" role="img" aria-labelledby="timeline-title" xmlns="http://www.w3.org/2000/svg">`, px(height))
	b.f(`<title id="timeline-title">Timeline: %s on %s</title>`, engine.Plural(len(a.Bars), "iteration"), engine.Plural(len(a.Rows), "row"))
	b.WriteString(svgDefs)
	sc := timeScale{from: a.Start, d: a.End.Sub(a.Start), x0: 0, x1: 100, unit: "%"}
	for i := range a.Rows {
		y := tlTop + float64(i)*tlRow
		b.f(`<rect class="lane" x="0" y="%s" width="100%%" height="%s"/>`, px(y+1), px(tlRow-2))
	}
	sc.axis(b, tlTop, bottom, false)
	for _, w := range a.Waits {
		x0, x1 := sc.x(w.From), sc.x(w.Until)
		b.f(`<rect class="wait-band" x="%s" y="%s" width="%s" height="%s"><title>%s</title></rect>`, sc.at(x0), px(tlTop), sc.at(max(x1-x0, 0.2)), px(bottom-tlTop), esc(w.Why))
	}
	for _, bar := range a.Bars {
		drawBar(b, sc, bar, repo, a.End)
	}
	if bs := a.Best; bs != nil {
		x := sc.x(bs.At)
		b.f(`<line class="best" x1="%s" y1="%s" x2="%s" y2="%s"><title>%s</title></line>`, sc.at(x), px(tlTop-2), sc.at(x), px(bottom+4), esc(bestText(bs)))
		anchor := "end"
		if x < 30 {
			anchor = "start"
		}
		b.f(`<text class="best-label" x="%s" y="%s" text-anchor="%s">best possible %s</text>`, sc.at(x), px(bottom+16), anchor, span(time.Duration(bs.BoundMS)*time.Millisecond))
	}
	if a.Active {
		x := sc.x(a.End)
		b.f(`<line class="now" x1="%s" y1="%s" x2="%s" y2="%s"/>`, sc.at(x), px(tlTop), sc.at(x), px(bottom))
	}
	b.WriteString(`</svg></div></div>`)
	return b
}

// drawBar draws one iteration; its label is clipped to it.
func drawBar(b *svg, sc timeScale, bar timelineBar, repo int, end time.Time) {
	l := outcomeLook(bar.Outcome)
	y := tlTop + float64(bar.Row)*tlRow + (tlRow-tlBar)/2
	slotEnd, last := bar.SlotEnd, bar.End
	if slotEnd.IsZero() {
		slotEnd = end
	}
	if last.IsZero() {
		last = end
	}
	x0, x1 := sc.x(bar.Start), sc.x(slotEnd)
	w := max(x1-x0, 0.25)
	rect := func(class, fill string, rx0, ry, rw, rh float64) {
		if fill != "" {
			fill = ` fill="` + fill + `"`
		}
		b.f(`<rect class="%s" x="%s" y="%s" width="%s" height="%s" rx="3"%s/>`, class, sc.at(rx0), px(ry), sc.at(rw), px(rh), fill)
	}
	b.f(`<a href="items/%s?repo=%d"><g class="bar %s" data-iteration="%d" data-item="%s" data-outcome="%s">`, esc(url.PathEscape(bar.Item)), repo, l.Class, bar.Number, esc(bar.Item), esc(bar.Outcome))
	b.f(`<title>%s</title>`, esc(barText(bar)))
	rect("fill", "", x0, y, w, tlBar)
	switch bar.Outcome {
	case dashboard.OutcomeFailed, dashboard.OutcomeBlocked:
		// Hatched: a failure reads as one without its colour.
		rect("overlay", "url(#hatch)", x0, y, w, tlBar)
	case dashboard.OutcomeRateLimited, dashboard.OutcomeWaiting:
		rect("overlay", "url(#dots)", x0, y, w, tlBar)
	}
	if !bar.GateStart.IsZero() {
		g0, g1 := sc.x(bar.GateStart), sc.x(bar.GateEnd)
		rect("gate", "", g0, y+tlBar-6, max(g1-g0, 0.2), 6)
	} else if bar.Outcome == dashboard.OutcomeRunning && !bar.AgentEnd.IsZero() {
		g0 := sc.x(bar.AgentEnd) // verifying now
		rect("gate", "", g0, y+tlBar-6, max(x1-g0, 0.2), 6)
	}
	if !bar.Asked.IsZero() {
		a1 := end
		if !bar.Answered.IsZero() {
			a1 = bar.Answered
		}
		rect("asked", "", sc.x(bar.Asked), y, max(sc.x(a1)-sc.x(bar.Asked), 0.2), tlBar)
	}
	if last.After(slotEnd) {
		// Waiting in the merge queue, its slot given back.
		b.f(`<line class="queue" x1="%s" y1="%s" x2="%s" y2="%s"/>`, sc.at(x1), px(y+tlBar+2), sc.at(sc.x(last)), px(y+tlBar+2))
	}
	// The label, clipped to the bar: the glyph and the story's id as far
	// as they fit.
	clip := fmt.Sprintf("clip-%d-%d", bar.Number, bar.Start.UnixNano()%1e9)
	b.f(`<clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`, clip, sc.at(x0), px(y), sc.at(w), px(tlBar))
	b.f(`<text class="bar-label" x="%s" y="%s" dx="3" clip-path="url(#%s)">%s %s</text>`, sc.at(x0), px(y+tlBar-5), clip, l.Glyph, esc(bar.Item))
	b.WriteString(`</g></a>`)
}

// barText is a bar's hover text: the story, attempt, role, duration and
// tokens.
func barText(bar timelineBar) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s · iteration %d", bar.Item, bar.Title, bar.Number)
	if bar.Attempt > 0 && bar.MaxAttempts > 0 {
		fmt.Fprintf(&b, " · attempt %d/%d", bar.Attempt, bar.MaxAttempts)
	}
	fmt.Fprintf(&b, " · %s", bar.Role)
	if bar.Agent != "" {
		fmt.Fprintf(&b, " (%s)", bar.Agent)
	}
	if bar.Worker != "" {
		fmt.Fprintf(&b, " · worker %s", bar.Worker)
	}
	fmt.Fprintf(&b, "\n%s %s after %s", outcomeLook(bar.Outcome).Glyph, outcomeLook(bar.Outcome).Word, span(time.Duration(bar.DurationMS)*time.Millisecond))
	if bar.AgentMS > 0 {
		fmt.Fprintf(&b, " (agent %s", span(time.Duration(bar.AgentMS)*time.Millisecond))
		if bar.GateMS > 0 {
			fmt.Fprintf(&b, ", gates %s", span(time.Duration(bar.GateMS)*time.Millisecond))
		}
		b.WriteString(")")
	}
	if bar.Tokens > 0 || bar.Usage.CostUSD > 0 {
		fmt.Fprintf(&b, "\n%s tokens", dashboard.Tokens(bar.Tokens))
		if bar.Usage.CostUSD > 0 {
			fmt.Fprintf(&b, ", $%.2f", bar.Usage.CostUSD)
		}
	}
	if bar.Summary != "" {
		b.WriteString("\n" + bar.Summary)
	}
	return b.String()
}

// bestText explains the best schedule's line.
func bestText(bs *bestSchedule) string {
	ms := func(v int64) string { return span(time.Duration(v) * time.Millisecond) }
	s := fmt.Sprintf("Best possible on %s: %s (critical path %s, work %s shared by %d). This run: %s so far.",
		engine.Plural(bs.Workers, "slot"), ms(bs.BoundMS), ms(bs.CriticalPathMS), ms(bs.WorkMS), bs.Workers, ms(bs.TookMS))
	if bs.Estimated > 0 {
		s += fmt.Sprintf(" %s not run yet counted at the median story's time.", engine.Plural(bs.Estimated, "story"))
	}
	return s
}
