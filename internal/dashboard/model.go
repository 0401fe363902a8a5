package dashboard

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/ralph-loop/ralph/internal/engine"
)

// Controls are what the keys do, given by the driver (the files a run
// reads: .ralph/pause, .ralph/stop; ralph run's own interrupt).
type Controls struct {
	SetPause func(on bool) error
	Stop     func() error
	// Guide gives the next iterations a person's guidance (`ralph guide`):
	// item "" for every item. Nil: the g key is off.
	Guide func(text, item string) (id string, err error)
	// Answer answers an agent's question (`ralph answer`). Nil: the a key
	// is off.
	Answer    func(id, text string) error
	Interrupt func() // ctrl+c in `ralph run`: stop the run now (nil in ralph watch)
	// Reattach says how to see the dashboard again after q.
	Reattach string
}

// PollEvery is how often the view reads the run's files.
const PollEvery = 250 * time.Millisecond

type tickMsg time.Time

// DoneMsg tells the view the run it shows is over (ralph run's own): it
// renders the last frame and quits.
type DoneMsg struct{}

type pagerDoneMsg struct{ err error }

// Model is the dashboard.
type Model struct {
	feed     *Feed
	ctl      Controls
	snap     Snapshot
	sel      int
	hideTail bool
	note     string
	now      func() time.Time
	done     bool
	// Closed: the person quit the view (q); the run goes on.
	Closed bool
	width  int
	// typing is guidance being typed (g: for every item, G: for the
	// selected one); nil when the keys act on the run.
	typing *guideInput
}

// guideInput is a line of guidance being typed, or an answer to the
// question named.
type guideInput struct {
	item     string
	question string
	text     []rune
}

// waitingQuestion is the first question of item that waits for an answer.
func (m *Model) waitingQuestion(item string) (engine.Question, bool) {
	for _, q := range m.snap.Questions {
		if q.Item == item && q.Waiting() {
			return q, true
		}
	}
	return engine.Question{}, false
}

// New is a dashboard over feed.
func New(feed *Feed, ctl Controls) *Model {
	m := &Model{feed: feed, ctl: ctl, now: time.Now}
	m.snap = feed.Poll()
	return m
}

func tick() tea.Cmd {
	return tea.Tick(PollEvery, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// Init starts the polling.
func (m *Model) Init() tea.Cmd { return tick() }

// Update reacts to a key, a tick, the run's end.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tickMsg:
		m.snap = m.feed.Poll()
		return m, tick()
	case DoneMsg:
		m.snap = m.feed.Poll()
		m.done = true
		return m, tea.Quit
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case pagerDoneMsg:
		if msg.err != nil {
			m.note = "pager: " + msg.err.Error()
		}
	case tea.KeyPressMsg:
		if m.typing != nil {
			return m.typed(msg)
		}
		return m.key(msg.String())
	}
	return m, nil
}

func (m *Model) items() []string {
	if m.snap.State == nil {
		return nil
	}
	return m.snap.State.Order
}

func (m *Model) key(k string) (tea.Model, tea.Cmd) {
	switch k {
	case "q", "esc":
		m.Closed = true
		return m, tea.Quit
	case "ctrl+c":
		if m.ctl.Interrupt != nil {
			m.ctl.Interrupt()
			m.note = "interrupting the run"
			return m, nil
		}
		m.Closed = true
		return m, tea.Quit
	case "up", "k":
		if m.sel > 0 {
			m.sel--
		}
	case "down", "j":
		if m.sel < len(m.items())-1 {
			m.sel++
		}
	case "t":
		m.hideTail = !m.hideTail
	case "g", "G":
		if m.ctl.Guide == nil {
			return m, nil
		}
		m.typing = &guideInput{}
		if items := m.items(); k == "G" && m.sel < len(items) {
			m.typing.item = items[m.sel]
		}
	case "a":
		items := m.items()
		if m.ctl.Answer == nil || m.sel >= len(items) {
			return m, nil
		}
		q, ok := m.waitingQuestion(items[m.sel])
		if !ok {
			m.note = items[m.sel] + " asked nothing that waits for an answer"
			return m, nil
		}
		m.typing = &guideInput{item: q.Item, question: q.ID}
	case "p":
		on := !m.snap.Paused
		if err := m.ctl.SetPause(on); err != nil {
			m.note = "pause: " + err.Error()
		} else if on {
			m.note = "paused: the iterations under way finish, then nothing starts until p again"
		} else {
			m.note = "resumed"
		}
		m.snap.Paused = on
	case "s":
		if err := m.ctl.Stop(); err != nil {
			m.note = "stop: " + err.Error()
		} else {
			m.note = "stopping after the current iteration"
		}
	case "enter", "o":
		items := m.items()
		if m.sel >= len(items) {
			return m, nil
		}
		tr := m.snap.Transcripts[items[m.sel]]
		if tr == "" {
			m.note = items[m.sel] + " has no transcript yet"
			return m, nil
		}
		pager := os.Getenv("PAGER")
		if pager == "" {
			pager = "less"
		}
		argv := append(strings.Fields(pager), tr)
		return m, tea.ExecProcess(exec.Command(argv[0], argv[1:]...), func(err error) tea.Msg { return pagerDoneMsg{err} })
	}
	return m, nil
}

// typed takes a key while guidance is typed: enter gives it, esc drops
// it, backspace takes a character back.
func (m *Model) typed(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	in := m.typing
	switch msg.String() {
	case "esc", "ctrl+c":
		m.typing, m.note = nil, "guidance dropped"
		if in.question != "" {
			m.note = "answer dropped"
		}
	case "enter":
		m.typing = nil
		text := strings.TrimSpace(string(in.text))
		if text == "" {
			m.note = "guidance dropped (empty)"
			if in.question != "" {
				m.note = "answer dropped (empty)"
			}
			return m, nil
		}
		if in.question != "" {
			if err := m.ctl.Answer(in.question, text); err != nil {
				m.note = "answer: " + err.Error()
			} else {
				m.note = "answered " + in.question + ": " + in.item + " goes on with it"
			}
			return m, nil
		}
		id, err := m.ctl.Guide(text, in.item)
		if err != nil {
			m.note = "guide: " + err.Error()
			return m, nil
		}
		m.note = "guidance " + id + " goes into the next iterations' prompts until one acknowledges it"
	case "backspace":
		if len(in.text) > 0 {
			in.text = in.text[:len(in.text)-1]
		}
	case "space":
		in.text = append(in.text, ' ')
	default:
		in.text = append(in.text, []rune(msg.Text)...)
	}
	return m, nil
}

var (
	bold   = lipgloss.NewStyle().Bold(true)
	faint  = lipgloss.NewStyle().Faint(true)
	green  = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	red    = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	yellow = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
	cyan   = lipgloss.NewStyle().Foreground(lipgloss.Color("6"))
)

// View renders the snapshot.
// The view fills the alternate screen: drawn inline, frames of changing
// height left lines of older ones on the screen and in the scrollback
// (the inline renderer loses its place), so the live view keeps to a
// screen of its own and its last frame is printed once it ends
// (FinalFrame).
func (m *Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	return v
}

// FinalFrame is the view's last frame, for the terminal's own screen once
// the alternate one is gone.
func (m *Model) FinalFrame() string {
	return m.Render()
}

// Render is the view as text (tests read it without a terminal).
func (m *Model) Render() string {
	var b strings.Builder
	st := m.snap.State
	if st == nil {
		b.WriteString("ralph: no run yet in this repository (waiting for `ralph run`)\n")
		if m.snap.Err != nil {
			b.WriteString(red.Render(m.snap.Err.Error()) + "\n")
		}
		return b.String()
	}
	passed, blocked, total := st.Counts()
	status := st.Status
	switch {
	case m.snap.Paused && m.snap.Active:
		status = yellow.Render("paused")
	case st.Status == engine.StatusRunning && !m.snap.Active:
		status = "interrupted"
	}
	fmt.Fprintf(&b, "%s · run %s · %s · iteration %s · %d/%d passed", bold.Render("ralph"), st.RunID, status,
		engine.IterationOf(st.Iteration, st.MaxIterations), passed, total)
	if marked := len(st.Marked()); marked > 0 {
		fmt.Fprintf(&b, ", %s", yellow.Render(fmt.Sprintf("%d marked by hand (not verified)", marked)))
	}
	if blocked > 0 {
		fmt.Fprintf(&b, ", %s", red.Render(fmt.Sprintf("%d blocked", blocked)))
	}
	if u := st.Usage; u.InputTokens+u.OutputTokens > 0 || u.CostUSD > 0 {
		fmt.Fprintf(&b, " · %s tokens", Tokens(u.InputTokens+u.OutputTokens))
		if u.CostUSD > 0 {
			fmt.Fprintf(&b, " · $%.2f", u.CostUSD)
		}
	}
	b.WriteString("\n")
	if m.snap.Sandbox != "" {
		line := "sandbox " + m.snap.Sandbox
		if strings.Contains(line, "; denied ") {
			b.WriteString(yellow.Render(clip(line, max(m.width, 80))) + "\n")
		} else {
			b.WriteString(faint.Render(clip(line, max(m.width, 80))) + "\n")
		}
	}
	if st.RateLimitedAt != nil && st.RateLimitedAt.After(m.now()) && m.snap.Active {
		fmt.Fprintf(&b, "%s\n", yellow.Render(fmt.Sprintf("rate limited: waiting %s (until %s)", elapsed(st.RateLimitedAt.Sub(m.now())), st.RateLimitedAt.Local().Format("15:04:05"))))
	}

	// The items.
	b.WriteString("\n" + bold.Render("Items") + "\n")
	running := map[string]*engine.Current{}
	if m.snap.Active {
		for _, c := range st.Current {
			running[c.Item] = c
		}
	}
	for i, id := range st.Order {
		is := st.Items[id]
		mark, style := "·", faint
		switch {
		case is.Status == engine.ItemPassed:
			mark, style = "✓", green
		case is.Status == engine.ItemBlocked:
			mark, style = "✗", red
		case is.Status == engine.ItemMarked:
			mark, style = "✋", yellow
		case running[id] != nil:
			mark, style = "▶", cyan
		}
		cursor := "  "
		if i == m.sel {
			cursor = "> "
		}
		status := is.Status
		if q, ok := m.waitingQuestion(id); ok && is.Status == engine.ItemPending {
			mark, style, status = "?", yellow, "waiting for an answer ("+q.ID+")"
		}
		line := fmt.Sprintf("%s%s %-10s %-34s %-8s attempts %-5s", cursor, mark, id, clip(is.Title, 34), status, is.AttemptsOf(st.MaxAttempts))
		if l := m.snap.Levels[id]; l > 0 {
			line += fmt.Sprintf("  L%d", l)
		}
		if is.Role != "" {
			line += "  " + is.Role
		}
		if u := is.Usage; u != nil && (u.InputTokens+u.OutputTokens > 0 || u.CostUSD > 0) {
			line += "  " + Tokens(u.InputTokens+u.OutputTokens) + " tok"
			if u.CostUSD > 0 {
				line += fmt.Sprintf(" $%.2f", u.CostUSD)
			}
		}
		b.WriteString(style.Render(line) + "\n")
	}
	if st.Untracked > 0 {
		fmt.Fprintf(&b, "  · … %d more, not started yet\n", st.Untracked)
	}

	// The workers.
	on := map[string]string{} // item → the remote worker running it
	for _, w := range m.snap.Remote {
		for _, it := range w.Items {
			on[it] = w.ID + " on " + w.Host
		}
	}
	if m.snap.Active && len(st.Current) > 0 {
		b.WriteString("\n" + bold.Render("Workers") + "\n")
		for _, c := range st.Current {
			role := c.Role
			if role == "" {
				role = "worker"
			}
			line := fmt.Sprintf("%s · iteration %d · attempt %d · %s · %s · %s", c.Item, c.Iteration, c.Attempt, role, c.Phase, elapsed(m.now().Sub(c.StartedAt)))
			if w := on[c.Item]; w != "" && c.Phase == engine.PhaseAgent {
				line += " · " + w
			}
			if c.QueuePos > 0 {
				line += fmt.Sprintf(" · merge queue #%d", c.QueuePos)
			}
			b.WriteString(cyan.Render(line) + "\n")
			if !m.hideTail {
				for _, l := range m.snap.Tails[c.Item] {
					b.WriteString("    " + clip(l, max(m.width-6, 60)) + "\n")
				}
			}
		}
	}
	if len(m.snap.Remote) > 0 {
		b.WriteString("\n" + bold.Render("Remote workers") + "\n")
		for _, w := range m.snap.Remote {
			running := strings.Join(w.Items, ", ")
			if running == "" {
				running = "idle"
			}
			line := fmt.Sprintf("  %-24s %-16s %d slots · %s", clip(w.ID, 24), clip(w.Host, 16), w.Slots, running)
			if w.Agent != "" {
				line += " · own agent " + w.Agent
			}
			b.WriteString(line + "\n")
		}
	}
	var waiting []engine.Question
	for _, q := range m.snap.Questions {
		if q.Waiting() {
			waiting = append(waiting, q)
		}
	}
	if len(waiting) > 0 {
		b.WriteString("\n" + bold.Render("Waiting for an answer") + "\n")
		for _, q := range waiting {
			b.WriteString(yellow.Render(clip(fmt.Sprintf("  %s %s: %s", q.ID, q.Item, strings.Join(strings.Fields(q.Text), " ")), max(m.width, 80))) + "\n")
		}
	}
	if len(m.snap.Gates) > 0 {
		b.WriteString("\n" + bold.Render("Last gates") + "\n")
		for _, g := range m.snap.Gates {
			style := green
			if strings.Contains(g, "FAILED") {
				style = red
			}
			b.WriteString("  " + style.Render(g) + "\n")
		}
	}
	if st.Status != engine.StatusRunning || m.done {
		fmt.Fprintf(&b, "\n%s %s — %s\n", bold.Render("Run ended:"), st.Status, st.StopReason)
		if next := st.NextStep(); next != "" {
			fmt.Fprintf(&b, "%s %s\n", bold.Render("Next:"), next)
		}
	}
	if m.note != "" {
		b.WriteString("\n" + yellow.Render(m.note) + "\n")
	}
	if in := m.typing; in != nil {
		aim := "every item"
		if in.item != "" {
			aim = in.item
		}
		label := "Guidance for " + aim + ":"
		if in.question != "" {
			label = "Answer to " + in.question + " (" + in.item + "):"
		}
		fmt.Fprintf(&b, "\n%s %s▏\n%s\n", bold.Render(label), string(in.text), faint.Render("enter give · esc drop"))
		return b.String()
	}
	keys := "↑/↓ select · enter transcript in $PAGER · p pause/resume · s stop · t tail on/off · "
	if m.ctl.Guide != nil {
		keys += "g guide · G guide the selected item · "
	}
	if m.ctl.Answer != nil && len(waiting) > 0 {
		keys += "a answer the selected item's question · "
	}
	b.WriteString(faint.Render("\n"+keys+"q close view") + "\n")
	return b.String()
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Tokens is a token count for people: 950, 12.3k, 1.2M.
func Tokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
