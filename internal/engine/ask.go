package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// Questions from an agent to a person (`ralph ask`). Inside an iteration
// the agent runs `ralph ask "QUESTION"`, which appends the question to
// the item's ask file (AskFile: .ralph/asks/<item>.<iteration>.jsonl; in
// the sandbox a scratch copied out after the agent ran, since .ralph is
// read-only to it). When the iteration is decided, the ask rule
// (internal/decide) records each question as a Question in
// .ralph/questions/<id>.json and holds the item: no attempt is spent, and
// the item is left out of selection while one of its questions waits.
// A person answers with `ralph answer ID "TEXT"` (or the dashboard, or a
// chat reply): the answer is sealed with the run's key, as plan
// decisions are, so an agent cannot answer its own question. The item's
// next prompt carries its questions and their answers. With an ask
// timeout a question nobody answered in time stops waiting; the prompt
// then says so.

// Question is one question an agent asked a person.
type Question struct {
	ID        string    `json:"id"` // q1, q2, … (numbered across the repository's runs)
	RunID     string    `json:"run_id"`
	Item      string    `json:"item"`
	Iteration int       `json:"iteration"`
	Text      string    `json:"text"`
	AskedAt   time.Time `json:"asked_at"`
	// Key names where the question came from (item, iteration, its line
	// in the ask file): a question recorded before a crash is not
	// recorded again when the iteration is decided again.
	Key string `json:"key"`
	// HoldsTree: the item left work in a tree other items share, so no
	// other item starts until the question is answered.
	HoldsTree  bool       `json:"holds_tree,omitempty"`
	Answer     string     `json:"answer,omitempty"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
	By         string     `json:"answered_by,omitempty"` // ralph answer, the dashboard, telegram, slack
	// Seal proves that a person's answer came through ralph's own
	// commands (see decision.go); an answer without it is not one.
	Seal string `json:"seal,omitempty"`
	// TimedOut: nobody answered within the ask timeout; the item went on.
	TimedOut bool `json:"timed_out,omitempty"`
	// Forged: the file held an answer ralph did not seal (CheckedQuestions
	// drops it; never written).
	Forged bool `json:"forged,omitempty"`
	// Chat is where the question was sent to a chat (telegram: the
	// message's id; slack: the message's ts), so that a reply there
	// answers it.
	Chat map[string]string `json:"chat,omitempty"`
}

// NoteQuestionMessage records that question id was sent to a chat as
// message ref.
func NoteQuestionMessage(p Paths, id, chat, ref string) error {
	return store.WithLock(questionsLock(p), func() error {
		var q Question
		if err := store.ReadJSON(questionFile(p, id), &q); err != nil || q.ID != id {
			return fmt.Errorf("no question %s", id)
		}
		if q.Chat == nil {
			q.Chat = map[string]string{}
		}
		q.Chat[chat] = ref
		return store.WriteJSON(questionFile(p, id), q)
	})
}

// QuestionsDir is where the questions are kept: .ralph/questions.
func QuestionsDir(p Paths) string { return filepath.Join(p.Dir, "questions") }

// AskDir is where `ralph ask` leaves an iteration's questions for the
// run: .ralph/asks (the sandbox shows the agent a scratch of its own
// there).
func AskDir(stateDir string) string { return filepath.Join(stateDir, "asks") }

// AskFile is the file `ralph ask` appends the questions of one iteration
// on an item to.
func AskFile(stateDir, item string, iteration int) string {
	return filepath.Join(AskDir(stateDir), safeFileName(item)+"."+strconv.Itoa(iteration)+".jsonl")
}

// Asked is one line of an ask file.
type Asked struct {
	Text string    `json:"text"`
	At   time.Time `json:"at"`
}

// maxQuestion bounds a question's text (and an answer's).
const maxQuestion = 4000

func questionsLock(p Paths) string { return filepath.Join(QuestionsDir(p), ".lock") }

func questionFile(p Paths, id string) string {
	return filepath.Join(QuestionsDir(p), safeFileName(id)+".json")
}

// LoadQuestions reads every question in .ralph/questions, oldest first.
func LoadQuestions(p Paths) ([]Question, error) {
	ents, err := os.ReadDir(QuestionsDir(p))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var qs []Question
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var q Question
		if err := store.ReadJSON(filepath.Join(QuestionsDir(p), e.Name()), &q); err != nil || q.ID == "" {
			continue // a torn or foreign file is no question
		}
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return questionNumber(qs[i].ID) < questionNumber(qs[j].ID) })
	return qs, nil
}

// RunQuestions are the questions of run runID.
func RunQuestions(p Paths, runID string) ([]Question, error) {
	all, err := LoadQuestions(p)
	var out []Question
	for _, q := range all {
		if q.RunID == runID {
			out = append(out, q)
		}
	}
	return out, err
}

// CheckedQuestions are the run's questions as the run takes them (for
// `ralph status`, the dashboards, MCP): an answer ralph did not seal is
// dropped and the question marked Forged, since it still waits.
func CheckedQuestions(p Paths, runID string) ([]Question, error) {
	qs, err := RunQuestions(p, runID)
	if err != nil || len(qs) == 0 {
		return qs, err
	}
	var key []byte
	for i, q := range qs {
		if q.Answer == "" {
			continue
		}
		if key == nil {
			if key, err = decisionKey(p, runID); err != nil {
				return qs, err
			}
		}
		if !q.answeredUnder(key) {
			qs[i].Answer, qs[i].AnsweredAt, qs[i].By, qs[i].Seal, qs[i].Forged = "", nil, "", "", true
		}
	}
	return qs, nil
}

func questionNumber(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "q"))
	return n
}

// sealFields are what an answer's seal covers.
func (q Question) sealFields() []string {
	at := ""
	if q.AnsweredAt != nil {
		at = q.AnsweredAt.UTC().Format(time.RFC3339Nano)
	}
	return []string{"answer", q.ID, q.RunID, q.Item, q.Text, q.Answer, q.By, at}
}

// answeredUnder reports whether q carries a person's answer sealed with key.
func (q Question) answeredUnder(key []byte) bool {
	return q.Answer != "" && q.AnsweredAt != nil && sealMatches(key, q.Seal, q.sealFields()...)
}

// Waiting reports whether q still waits for a person (as far as the file
// says: a forged answer is caught by the run, which checks the seal).
func (q Question) Waiting() bool { return q.Answer == "" && !q.TimedOut }

// RecordQuestions records the questions an iteration on item asked (the
// lines of its ask file), each once, and returns the new ones.
func RecordQuestions(p Paths, runID, item string, iteration int, asked []Asked, holdsTree bool, now time.Time) ([]Question, error) {
	var added []Question
	err := store.WithLock(questionsLock(p), func() error {
		all, err := LoadQuestions(p)
		if err != nil {
			return err
		}
		seen, top := map[string]bool{}, 0
		for _, q := range all {
			seen[q.RunID+"\x00"+q.Key] = true
			top = max(top, questionNumber(q.ID))
		}
		for i, a := range asked {
			key := fmt.Sprintf("%s/%d/%d", item, iteration, i+1)
			if seen[runID+"\x00"+key] {
				continue
			}
			top++
			q := Question{ID: "q" + strconv.Itoa(top), RunID: runID, Item: item, Iteration: iteration, Text: clip(a.Text, maxQuestion),
				AskedAt: now.UTC(), Key: key, HoldsTree: holdsTree}
			if err := store.WriteJSON(questionFile(p, q.ID), q); err != nil {
				return err
			}
			added = append(added, q)
		}
		return nil
	})
	return added, err
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = s[:n] + " …"
	}
	return s
}

// ReadAsked reads an ask file (a torn last line is dropped); a missing
// file is no question.
func ReadAsked(path string) ([]Asked, error) {
	var out []Asked
	err := store.ReadJSONL(path, func(_ int, raw []byte) error {
		var a Asked
		if err := json.Unmarshal(raw, &a); err != nil || strings.TrimSpace(a.Text) == "" {
			return nil // not a question ralph ask wrote
		}
		out = append(out, a)
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// AnswerQuestion records a person's answer to question id (`ralph
// answer`, the dashboard). It refuses when called from inside an
// iteration, writes only the question's file (atomically, under the
// questions' lock, sealed with the run's key) and never the run's
// state: a running loop sees the answer before it next picks an item.
func AnswerQuestion(p Paths, id, answer, by string, now time.Time) (Question, error) {
	st, _, err := LoadOrRebuildState(p)
	if err != nil {
		return Question{}, err
	}
	if st == nil {
		return Question{}, usage.Errorf("no ralph run in %s yet: no question waits for an answer", p.Root)
	}
	if why := fromIteration(p, st); why != "" {
		msg := fmt.Sprintf("ralph answer %s was called from inside an iteration (%s); refused: only a person answers an agent's question", id, why)
		_ = store.AppendJSONL(p.Events, Event{Time: time.Now().UTC(), RunID: st.RunID, Type: "tamper_detected", Message: msg})
		return Question{}, usage.Errorf("%s", msg)
	}
	return answerQuestion(p, id, answer, by, now)
}

// AnswerInRun is AnswerQuestion for ralph run's own process (its
// dashboard's a key, its chat listener): the person is at its terminal
// or in the chat, and the caller's check (which refuses the run itself,
// so that no agent answers through it) does not apply.
func AnswerInRun(p Paths, id, answer, by string, now time.Time) (Question, error) {
	return answerQuestion(p, id, answer, by, now)
}

// answerQuestion is AnswerQuestion without the caller's check.
func answerQuestion(p Paths, id, answer, by string, now time.Time) (Question, error) {
	answer = strings.TrimSpace(answer)
	if answer == "" {
		return Question{}, usage.Errorf("the answer is empty: say something the agent can act on")
	}
	var q Question
	err := store.WithLock(questionsLock(p), func() error {
		if err := store.ReadJSON(questionFile(p, id), &q); err != nil || q.ID != id {
			return usage.Errorf("no question %s (%s)", id, waitingQuestions(p))
		}
		key, err := decisionKey(p, q.RunID)
		if err != nil {
			return err
		}
		switch {
		case q.answeredUnder(key):
			return usage.Errorf("%s is answered already (%q)", id, q.Answer)
		case q.TimedOut:
			return usage.Errorf("%s timed out (--ask-timeout): %s went on without an answer; guide it with `ralph guide` instead", id, q.Item)
		}
		at := now.UTC()
		q.Answer, q.AnsweredAt, q.By = clip(answer, maxQuestion), &at, by
		q.Seal = sealOf(key, q.sealFields()...)
		return store.WriteJSON(questionFile(p, id), q)
	})
	return q, err
}

// waitingQuestions names the questions that wait, for an error message.
func waitingQuestions(p Paths) string {
	qs, _ := LoadQuestions(p)
	var ids []string
	for _, q := range qs {
		if q.Waiting() {
			ids = append(ids, q.ID+" ("+q.Item+")")
		}
	}
	if len(ids) == 0 {
		return "no question waits for an answer"
	}
	return "waiting for an answer: " + strings.Join(ids, ", ")
}

// QuestionView is one question as `ralph status --json`, the web API and
// MCP show it: the agent's question and the person's answer (null while
// there is none).
type QuestionView struct {
	ID         string     `json:"id"`
	Item       string     `json:"item"`
	Text       string     `json:"text"`
	Answer     *string    `json:"answer"`
	Waiting    bool       `json:"waiting"`
	Iteration  int        `json:"iteration"`
	AskedAt    time.Time  `json:"asked_at"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	TimedOut   bool       `json:"timed_out,omitempty"`
	// Forged: the file held an answer ralph did not seal; it still waits.
	Forged bool `json:"forged_answer,omitempty"`
}

// QuestionViews are qs (CheckedQuestions) as they are shown; never nil.
func QuestionViews(qs []Question) []QuestionView {
	out := []QuestionView{}
	for _, q := range qs {
		v := QuestionView{ID: q.ID, Item: q.Item, Text: q.Text, Waiting: q.Waiting(), Iteration: q.Iteration, AskedAt: q.AskedAt,
			AnsweredAt: q.AnsweredAt, AnsweredBy: q.By, TimedOut: q.TimedOut, Forged: q.Forged}
		if q.Answer != "" {
			a := q.Answer
			v.Answer = &a
		}
		out = append(out, v)
	}
	return out
}

// RunID is the run's id.
func (x *Iteration) RunID() string { return x.e.runID() }

// askState is what the run's questions say for selection: the items
// that wait for an answer, and whether one of them holds a shared tree.
type askState struct {
	waiting   map[string]bool
	holdsTree string // an item whose work in a shared tree waits
}

// asking reads the run's questions; an answer whose seal does not match
// is reported (once per question) and counts as none.
func (e *Engine) asking(runID string) askState {
	var s askState
	qs, err := RunQuestions(e.cfg.Paths, runID)
	if err != nil || len(qs) == 0 {
		return s
	}
	var key []byte
	for _, q := range qs {
		waits := q.Waiting()
		if !waits && !q.TimedOut {
			if key == nil {
				if key, err = decisionKey(e.cfg.Paths, runID); err != nil {
					return s
				}
			}
			if !q.answeredUnder(key) {
				waits = true
				e.forgedAnswer(q)
			}
		}
		if waits {
			if s.waiting == nil {
				s.waiting = map[string]bool{}
			}
			s.waiting[q.Item] = true
			if q.HoldsTree {
				s.holdsTree = q.Item
			}
		}
	}
	return s
}

// forgedAnswer reports an answer ralph did not seal, once.
func (e *Engine) forgedAnswer(q Question) {
	e.askMu.Lock()
	defer e.askMu.Unlock()
	if e.forged == nil {
		e.forged = map[string]bool{}
	}
	if e.forged[q.ID] {
		return
	}
	e.forged[q.ID] = true
	e.emit(Event{Type: "tamper_detected", Item: q.Item, Message: fmt.Sprintf("%s: the answer in %s was not written by `ralph answer` (no valid seal): it is ignored and %s still waits", q.ID, relTo(e.cfg.Paths.Root, questionFile(e.cfg.Paths, q.ID)), q.Item)})
}

// takeAnswers is the scheduler's look at the questions before it picks an
// item: questions past the ask timeout stop waiting, and an answer that
// came is announced once.
func (e *Engine) takeAnswers() {
	var runID string
	e.box.read(func(st *State) { runID = st.RunID })
	qs, err := CheckedQuestions(e.cfg.Paths, runID)
	if err != nil || len(qs) == 0 {
		return
	}
	now := e.cfg.Clock.Now()
	for _, q := range qs {
		switch {
		case q.Answer != "" && !e.announced(q.ID):
			e.emit(Event{Type: "question_answered", Item: q.Item, Message: fmt.Sprintf("%s answered by %s (%s): %s; %s goes on", q.ID, q.By, oneLine(q.Text, 80), oneLine(q.Answer, 120), q.Item),
				Data: map[string]any{"question": q.ID, "by": q.By}})
		case q.Waiting() && e.cfg.Limits.AskTimeout > 0 && now.Sub(q.AskedAt) >= e.cfg.Limits.AskTimeout:
			if e.timeOut(q.ID) {
				e.announced(q.ID)
				e.emit(Event{Type: "question_timed_out", Item: q.Item, Message: fmt.Sprintf("%s: nobody answered within %s (--ask-timeout); %s goes on without an answer", q.ID, e.cfg.Limits.AskTimeout, q.Item),
					Data: map[string]any{"question": q.ID}})
			}
		}
	}
}

// announced reports whether the question's end was announced, marking it.
func (e *Engine) announced(id string) bool {
	e.askMu.Lock()
	defer e.askMu.Unlock()
	if e.told == nil {
		e.told = map[string]bool{}
	}
	was := e.told[id]
	e.told[id] = true
	return was
}

// timeOut marks a waiting question timed out; false when it was answered
// meanwhile.
func (e *Engine) timeOut(id string) bool {
	p := e.cfg.Paths
	done := false
	_ = store.WithLock(questionsLock(p), func() error {
		var q Question
		if err := store.ReadJSON(questionFile(p, id), &q); err != nil || !q.Waiting() {
			return err
		}
		q.TimedOut, done = true, true
		return store.WriteJSON(questionFile(p, id), q)
	})
	return done
}

// StatusAwaitingAnswer: the Stop-hook driver (which cannot wait) stopped
// with nothing to do but items waiting for answers; `ralph run` waits
// for them instead.
const StatusAwaitingAnswer = "awaiting_answer"

// answersAwaited says which items wait for answers, for a stop reason
// ("" when none does).
func (e *Engine) answersAwaited(runID string) string {
	qs, _ := CheckedQuestions(e.cfg.Paths, runID)
	var ids []string
	for _, q := range qs {
		if q.Waiting() {
			ids = append(ids, fmt.Sprintf("%s (%s: %s)", q.ID, q.Item, oneLine(q.Text, 80)))
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return "waiting for an answer: " + strings.Join(ids, ", ") + "; `ralph answer ID \"TEXT\"`, then the next session (or `ralph run`) goes on"
}

// askPoll is how often an idle run looks for answers.
const askPoll = 500 * time.Millisecond

// waitForAnswers waits one poll with nothing running while items wait for
// answers, saying once what it waits for.
func (e *Engine) waitForAnswers(ctx context.Context, a askState) error {
	if !e.awaiting {
		e.awaiting = true
		var items []string
		for id := range a.waiting {
			items = append(items, id)
		}
		sort.Strings(items)
		msg := fmt.Sprintf("waiting for an answer: %s; `ralph answer ID \"TEXT\"` (see `ralph status`) lets it go on", strings.Join(items, ", "))
		if t := e.cfg.Limits.AskTimeout; t > 0 {
			msg += fmt.Sprintf("; after %s without one it goes on alone (--ask-timeout)", t)
		}
		e.emit(Event{Type: "awaiting_answer", Message: msg, Data: map[string]any{"items": items}})
	}
	return e.cfg.Clock.Sleep(ctx, askPoll)
}

// questionsFor is what an item's next prompt carries: its questions in
// this run and their answers (or that none came in time).
func (e *Engine) questionsFor(item, runID string) []Question {
	qs, err := RunQuestions(e.cfg.Paths, runID)
	if err != nil {
		return nil
	}
	var out []Question
	for _, q := range qs {
		if q.Item == item && !q.Waiting() {
			out = append(out, q)
		}
	}
	return out
}

// questionsSection is the prompt's section on an item's questions.
func questionsSection(qs []Question, timeout time.Duration) string {
	if len(qs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Your questions and a person's answers\n\nAn earlier iteration asked a person (`ralph ask`). Act on the answers:\n")
	for _, q := range qs {
		fmt.Fprintf(&b, "\n- %s (iteration %d): %s\n", q.ID, q.Iteration, q.Text)
		if q.Answer != "" {
			fmt.Fprintf(&b, "  Answer: %s\n", q.Answer)
		} else {
			fmt.Fprintf(&b, "  No answer came within %s. Decide on your own, and say in your final message what you assumed.\n", timeout)
		}
	}
	return b.String()
}

// askSection tells every agent how to ask.
const askSection = `
## Asking a person

If you cannot go on without a decision only a person can make, run ` + "`ralph ask \"YOUR QUESTION\"`" + ` (one short, self-contained question), then end this iteration at once without claiming the %s done. The %s waits for the answer (other work goes on) and your next iteration's prompt carries the question and the answer. Ask before you change files when you can.
`

// OneLine folds s into one line of at most n bytes (for the commands'
// messages).
func OneLine(s string, n int) string { return oneLine(s, n) }
