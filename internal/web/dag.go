package web

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ralph-loop/ralph/internal/dashboard"
	"github.com/ralph-loop/ralph/internal/engine"
)

// dagAnswer is /api/dag: the PRD's stories with their status, their
// dependencies as edges and their levels (1: no dependencies; a story's
// level is one more than its deepest dependency's). With many stories
// (Folded) the picture keeps to what is left: the stories of a level
// that passed are one node, and only the edges from dependencies that
// have not passed are drawn; ?dag=all shows every story and edge.
type dagAnswer struct {
	Stories int        `json:"stories"`
	Folded  bool       `json:"folded"`
	Levels  []dagLevel `json:"levels"`
	Nodes   []dagNode  `json:"nodes"`
	Edges   []dagEdge  `json:"edges"`
}

type dagLevel struct {
	Level   int      `json:"level"`
	Stories []string `json:"stories"`
	Passed  int      `json:"passed"`
	// Folded: the level's passed stories are one node in the picture.
	Folded bool `json:"folded"`
}

type dagNode struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	Status    string   `json:"status"` // passed, earlier (before this run), running, waiting (a plan), blocked, pending
	Level     int      `json:"level"`
	DependsOn []string `json:"depends_on"`
	Attempts  string   `json:"attempts"`
	Commit    string   `json:"commit,omitempty"`
}

type dagEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// foldAbove is the number of stories above which the picture folds
// what passed.
const foldAbove = 30

// itemStatus is an item's status as the pictures show it: the engine's,
// or "earlier" for one done before the run and "waiting" for one whose
// plan waits for a person.
func itemStatus(is *engine.ItemState, running, waiting bool) string {
	switch {
	case is.PassedBefore():
		return "earlier"
	case is.Status == engine.ItemPassed, is.Status == engine.ItemBlocked, is.Status == engine.ItemMarked:
		return is.Status
	case waiting:
		return "waiting"
	case running || is.Status == engine.ItemRunning:
		return engine.ItemRunning
	}
	return engine.ItemPending
}

// dag builds the answer; all unfolds every level.
func dag(snap dashboard.Snapshot, commits map[string]string, all bool) dagAnswer {
	a := dagAnswer{Levels: []dagLevel{}, Nodes: []dagNode{}, Edges: []dagEdge{}}
	st := snap.State
	if st == nil || len(snap.Levels) == 0 {
		return a
	}
	running := map[string]bool{}
	if snap.Active {
		for _, c := range st.Current {
			running[c.Item] = true
		}
	}
	waiting := engine.Waiting(st)
	for _, id := range st.Order {
		is := st.Items[id]
		lv := snap.Levels[id]
		if lv == 0 {
			continue // not in the PRD now
		}
		n := dagNode{ID: id, Title: is.Title, Status: itemStatus(is, running[id], slices.Contains(waiting, id)), Level: lv,
			DependsOn: append([]string{}, snap.DependsOn[id]...), Attempts: is.AttemptsOf(st.MaxAttempts), Commit: commitOf(is, commits)}
		a.Nodes = append(a.Nodes, n)
		for len(a.Levels) < lv {
			a.Levels = append(a.Levels, dagLevel{Level: len(a.Levels) + 1, Stories: []string{}})
		}
		l := &a.Levels[lv-1]
		l.Stories = append(l.Stories, id)
		if n.Status == engine.ItemPassed || n.Status == "earlier" {
			l.Passed++
		}
		for _, d := range n.DependsOn {
			a.Edges = append(a.Edges, dagEdge{From: d, To: id})
		}
	}
	a.Stories = len(a.Nodes)
	a.Folded = a.Stories > foldAbove && !all
	if a.Folded {
		for i := range a.Levels {
			a.Levels[i].Folded = a.Levels[i].Passed > 1
		}
	}
	return a
}

// done reports whether a node's status is passed (in this run or
// before).
func done(status string) bool { return status == engine.ItemPassed || status == "earlier" }

// commitOf is the item's commit: its state's, or the one a commit on the
// branch names it in (an item passed in an earlier run).
func commitOf(is *engine.ItemState, commits map[string]string) string {
	if is.Commit != "" {
		return is.Commit
	}
	if is.Status == engine.ItemPassed {
		return commits[is.ID]
	}
	return ""
}

// Drawing the DAG.
const (
	dagColumn = 176.0
	dagNodeW  = 150.0
	dagNodeH  = 26.0
	dagGap    = 8.0
	dagTop    = 24.0
	dagLeft   = 8.0
)

// dagSVG draws the answer: a column per level, left to right; a node per
// story (a folded level's passed stories are one node), coloured by
// status with its glyph; an edge per dependency, solid once the
// dependency passed, dashed while it has not (folded: only those). A
// node links to the story's page.
func dagSVG(a dagAnswer, repo int) *svg {
	// Each node's place: its column, and its row in the column, ordered
	// by the rows of its dependencies (fewer crossings).
	type place struct {
		col int
		row float64
	}
	at := map[string]place{}      // by node id
	nodeOf := map[string]string{} // story → the id of the node that draws it
	status, deps := map[string]string{}, map[string][]string{}
	for _, n := range a.Nodes {
		status[n.ID], deps[n.ID] = n.Status, n.DependsOn
	}
	drawnEdge := func(from string) bool { return !a.Folded || !done(status[from]) }
	rows := 0
	for _, l := range a.Levels {
		col, row := l.Level-1, 0
		var order []string
		for _, s := range l.Stories {
			if l.Folded && done(status[s]) {
				nodeOf[s] = "level-" + strconv.Itoa(l.Level)
				continue
			}
			order = append(order, s)
		}
		if l.Folded {
			at["level-"+strconv.Itoa(l.Level)] = place{col, 0}
			row = 1
		}
		bary := map[string]float64{}
		for i, s := range order {
			sum, k := 0.0, 0
			for _, d := range deps[s] {
				if p, ok := at[nodeOf[d]]; ok && drawnEdge(d) {
					sum += p.row
					k++
				}
			}
			bary[s] = float64(i) / 1000 // file order breaks ties
			if k > 0 {
				bary[s] += sum / float64(k)
			}
		}
		sort.SliceStable(order, func(i, j int) bool { return bary[order[i]] < bary[order[j]] })
		for i, s := range order {
			nodeOf[s] = s
			at[s] = place{col, float64(row + i)}
		}
		rows = max(rows, row+len(order))
	}
	width := dagLeft*2 + float64(max(len(a.Levels), 1))*dagColumn
	height := dagTop + float64(max(rows, 1))*(dagNodeH+dagGap) + 4
	xy := func(id string) (float64, float64) {
		p := at[id]
		return dagLeft + float64(p.col)*dagColumn, dagTop + p.row*(dagNodeH+dagGap)
	}
	b := &svg{}
	b.f(`<svg id="dag-svg" class="chart dag" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-labelledby="dag-title" xmlns="http://www.w3.org/2000/svg">`, px(width), px(height), px(width), px(height))
	b.f(`<title id="dag-title">Stories and their dependencies: %s in %s</title>`, engine.Plural(a.Stories, "story"), engine.Plural(len(a.Levels), "level"))
	for _, l := range a.Levels {
		x := dagLeft + float64(l.Level-1)*dagColumn
		b.f(`<text class="level" x="%s" y="14">L%d · %d/%d ✓</text>`, px(x), l.Level, l.Passed, len(l.Stories))
	}
	drawn := map[[2]string]bool{}
	for _, e := range a.Edges {
		from, to := nodeOf[e.From], nodeOf[e.To]
		if from == "" || to == "" || from == to || drawn[[2]string{from, to}] || !drawnEdge(e.From) {
			continue
		}
		drawn[[2]string{from, to}] = true
		x1, y1 := xy(from)
		x2, y2 := xy(to)
		x1, y1, y2 = x1+dagNodeW, y1+dagNodeH/2, y2+dagNodeH/2
		cls := "edge"
		if !done(status[e.From]) {
			cls += " open"
		}
		dx := (x2 - x1) / 2
		b.f(`<path class="%s" d="M%s %s C%s %s %s %s %s %s" data-from="%s" data-to="%s"/>`, cls, px(x1), px(y1), px(x1+dx), px(y1), px(x2-dx), px(y2), px(x2), px(y2), esc(e.From), esc(e.To))
	}
	for _, l := range a.Levels {
		if !l.Folded {
			continue
		}
		x, y := xy("level-" + strconv.Itoa(l.Level))
		b.f(`<a href="?repo=%d&amp;dag=all#dag-h"><g class="node folded passed" data-level="%d"><title>Level %d: %d of %s passed (folded; click to show every story)</title>`, repo, l.Level, l.Level, l.Passed, engine.Plural(len(l.Stories), "story"))
		b.f(`<rect x="%s" y="%s" width="%s" height="%s" rx="5"/><text x="%s" y="%s">✓ %d passed</text></g></a>`, px(x), px(y), px(dagNodeW), px(dagNodeH), px(x+8), px(y+17), l.Passed)
	}
	for _, n := range a.Nodes {
		if nodeOf[n.ID] != n.ID {
			continue
		}
		x, y := xy(n.ID)
		lk := statusLook(n.Status)
		tip := fmt.Sprintf("%s %s — %s · attempts %s", n.ID, n.Title, lk.Word, n.Attempts)
		if len(n.DependsOn) > 0 {
			tip += " · after " + strings.Join(n.DependsOn, ", ")
		}
		if n.Commit != "" {
			tip += " · commit " + engine.ShortSHA(n.Commit)
		}
		b.f(`<a href="items/%s?repo=%d"><g class="node %s" data-id="%s" data-status="%s"><title>%s</title>`, esc(url.PathEscape(n.ID)), repo, lk.Class, esc(n.ID), esc(n.Status), esc(tip))
		b.f(`<rect x="%s" y="%s" width="%s" height="%s" rx="5"/>`, px(x), px(y), px(dagNodeW), px(dagNodeH))
		b.f(`<text x="%s" y="%s">%s %s</text></g></a>`, px(x+8), px(y+17), lk.Glyph, esc(clipText(n.ID+" "+n.Title, 19)))
	}
	b.WriteString(`</svg>`)
	return b
}
