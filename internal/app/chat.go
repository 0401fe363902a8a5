package app

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/usage"
)

// A chat both tells people and hears them: the notifications go there,
// and a reply to an agent's question (ralph ask) answers it. Telegram
// (the Bot API: sendMessage, getUpdates) and Slack with a bot token
// (chat.postMessage, conversations.replies) are chats; a Slack incoming
// webhook only tells.
type chat interface {
	name() string
	// post sends text; for a question it returns the message's reference
	// (kept with the question, so that a reply to it answers it).
	post(ctx context.Context, text string, question bool) (ref string, err error)
	// replies are the answers people gave in the chat since the last
	// look, to the questions that wait (by id).
	replies(ctx context.Context, waiting []engine.Question) ([]chatReply, error)
}

// chatReply is a person's answer in a chat.
type chatReply struct {
	question, text, by string
}

// chatSend is a notifier target sending to c; a question's message is
// remembered with the question.
func (n *notifier) chatSend(c chat) func(ctx context.Context, nt notification, _ []byte) error {
	return func(ctx context.Context, nt notification, _ []byte) error {
		q, _ := nt.Data["question"].(string)
		asked := nt.Type == "question_asked" && q != ""
		text := nt.text()
		if asked {
			text += "\n(reply to this message to answer it)"
		}
		ref, err := c.post(ctx, text, asked)
		if err == nil && asked && ref != "" {
			err = engine.NoteQuestionMessage(n.paths, q, c.name(), ref)
		}
		return err
	}
}

// chatPoll is how often the chats are read while a question waits.
var chatPoll = 2 * time.Second

// listen answers the run's questions from the chats' replies until ctx
// ends: each look reads the questions that wait and asks every chat for
// replies to them; an answer is given as `ralph answer` would (sealed),
// and said in the chat.
func (n *notifier) listen(ctx context.Context, runID func() string) {
	if n == nil || len(n.chats) == 0 {
		return
	}
	t := time.NewTicker(chatPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		qs, _ := engine.CheckedQuestions(n.paths, runID())
		var waiting []engine.Question
		for _, q := range qs {
			if q.Waiting() {
				waiting = append(waiting, q)
			}
		}
		if len(waiting) == 0 {
			continue
		}
		for _, c := range n.chats {
			lctx, cancel := context.WithTimeout(ctx, n.timeout)
			replies, err := c.replies(lctx, waiting)
			cancel()
			if err != nil {
				n.failed("reading "+c.name()+" for answers", err.Error())
				continue
			}
			for _, r := range replies {
				q, err := engine.AnswerInRun(n.paths, r.question, r.text, r.by, time.Now())
				msg := fmt.Sprintf("ralph: %s answered (%s goes on with it)", q.ID, q.Item)
				if err != nil {
					msg = fmt.Sprintf("ralph: %s: %v", r.question, err)
				}
				pctx, cancel := context.WithTimeout(ctx, n.timeout)
				_, _ = c.post(pctx, msg, false)
				cancel()
			}
		}
	}
}

// runIDOf is the id of the run whose state is at p ("" before it has one).
func runIDOf(p engine.Paths) string {
	st, err := engine.LoadState(p.State)
	if err != nil || st == nil {
		return ""
	}
	return st.RunID
}

// answerLine is an answer written as a message of its own: "q3: text",
// "q3 text" or "/answer q3 text".
var answerLine = regexp.MustCompile(`(?s)^\s*(?:/answer(?:@\w+)?\s+)?(q\d+)\s*[:\s]\s*(.+)$`)

// telegramChat is a Telegram bot in one chat.
type telegramChat struct {
	client      *http.Client
	api, token  string
	chatID      string
	mu          sync.Mutex
	offset      int64 // the next update to read
	initialised bool
}

func newTelegramChat(tg *config.Telegram, client *http.Client) (*telegramChat, error) {
	token, err := fromEnv("notify.telegram", tg.TokenEnv, "")
	if err != nil {
		return nil, err
	}
	if tg.ChatID == "" {
		return nil, usage.Errorf("notify.telegram: chat_id is missing")
	}
	api := strings.TrimRight(tg.APIURL, "/")
	if api == "" {
		api = "https://api.telegram.org"
	}
	return &telegramChat{client: client, api: api, token: token, chatID: tg.ChatID}, nil
}

func (t *telegramChat) name() string { return "telegram" }

func (t *telegramChat) method(m string) string { return t.api + "/bot" + t.token + "/" + m }

func (t *telegramChat) post(ctx context.Context, text string, question bool) (string, error) {
	body := map[string]any{"chat_id": t.chatID, "text": text, "disable_web_page_preview": true}
	if question {
		body["reply_markup"] = map[string]any{"force_reply": true, "input_field_placeholder": "your answer"}
	}
	b, _ := json.Marshal(body)
	var out struct {
		OK     bool `json:"ok"`
		Result struct {
			MessageID int64 `json:"message_id"`
		} `json:"result"`
	}
	if !question {
		return "", postJSON(ctx, t.client, t.method("sendMessage"), b)
	}
	if err := callJSON(ctx, t.client, http.MethodPost, t.method("sendMessage"), "", b, &out); err != nil {
		return "", err
	}
	if out.Result.MessageID == 0 {
		return "", fmt.Errorf("sendMessage named no message")
	}
	return strconv.FormatInt(out.Result.MessageID, 10), nil
}

// telegramUpdate is the part of an update ralph reads.
type telegramUpdate struct {
	UpdateID int64 `json:"update_id"`
	Message  *struct {
		Text string `json:"text"`
		Chat struct {
			ID int64 `json:"id"`
		} `json:"chat"`
		From *struct {
			Username  string `json:"username"`
			FirstName string `json:"first_name"`
			IsBot     bool   `json:"is_bot"`
		} `json:"from"`
		ReplyTo *struct {
			MessageID int64 `json:"message_id"`
		} `json:"reply_to_message"`
	} `json:"message"`
}

// replies reads the updates since the last look (each read once: the
// offset confirms them) and keeps the messages of the run's chat that
// answer a waiting question: a reply to its message, or "qN: text".
func (t *telegramChat) replies(ctx context.Context, waiting []engine.Question) ([]chatReply, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"offset": t.offset, "timeout": 0, "allowed_updates": []string{"message"}})
	var out struct {
		OK     bool             `json:"ok"`
		Result []telegramUpdate `json:"result"`
	}
	if err := callJSON(ctx, t.client, http.MethodPost, t.method("getUpdates"), "", b, &out); err != nil {
		return nil, err
	}
	byMsg, ids := map[string]string{}, map[string]bool{}
	for _, q := range waiting {
		if ref := q.Chat["telegram"]; ref != "" {
			byMsg[ref] = q.ID
		}
		ids[q.ID] = true
	}
	var rs []chatReply
	for _, u := range out.Result {
		t.offset = max(t.offset, u.UpdateID+1)
		m := u.Message
		if m == nil || strconv.FormatInt(m.Chat.ID, 10) != t.chatID || (m.From != nil && m.From.IsBot) || strings.TrimSpace(m.Text) == "" {
			continue
		}
		by := "telegram"
		if m.From != nil {
			by += " (" + cmp.Or(m.From.Username, m.From.FirstName) + ")"
		}
		if m.ReplyTo != nil {
			if q := byMsg[strconv.FormatInt(m.ReplyTo.MessageID, 10)]; q != "" {
				rs = append(rs, chatReply{question: q, text: m.Text, by: by})
				continue
			}
		}
		if g := answerLine.FindStringSubmatch(m.Text); g != nil && ids[g[1]] {
			rs = append(rs, chatReply{question: g[1], text: g[2], by: by})
		}
	}
	return rs, nil
}

// slackChat is a Slack bot posting to one channel.
type slackChat struct {
	client       *http.Client
	api, token   string
	channel      string
	mu           sync.Mutex
	seen         map[string]bool // replies already taken, by ts
	botUser, bot string
}

func newSlackChat(s *config.Slack, client *http.Client) (*slackChat, error) {
	token, err := fromEnv("notify.slack", s.BotTokenEnv, "")
	if err != nil {
		return nil, err
	}
	if s.Channel == "" {
		return nil, usage.Errorf("notify.slack: with bot_token_env, name the channel (its id) to post to")
	}
	api := strings.TrimRight(s.APIURL, "/")
	if api == "" {
		api = "https://slack.com/api"
	}
	return &slackChat{client: client, api: api, token: token, channel: s.Channel, seen: map[string]bool{}}, nil
}

func (s *slackChat) name() string { return "slack" }

// slackAnswer is the envelope of every Slack Web API answer.
type slackAnswer struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

func (s *slackChat) post(ctx context.Context, text string, question bool) (string, error) {
	b, _ := json.Marshal(map[string]any{"channel": s.channel, "text": text, "unfurl_links": false})
	var out struct {
		slackAnswer
		TS      string `json:"ts"`
		Message struct {
			User  string `json:"user"`
			BotID string `json:"bot_id"`
		} `json:"message"`
	}
	if err := callJSON(ctx, s.client, http.MethodPost, s.api+"/chat.postMessage", s.token, b, &out); err != nil {
		return "", err
	}
	if !out.OK {
		return "", fmt.Errorf("chat.postMessage: %s", out.Error)
	}
	s.mu.Lock()
	s.botUser, s.bot = cmp.Or(out.Message.User, s.botUser), cmp.Or(out.Message.BotID, s.bot)
	s.mu.Unlock()
	return out.TS, nil
}

// replies reads the thread of each waiting question's message: its
// first reply that is not the bot's answers it.
func (s *slackChat) replies(ctx context.Context, waiting []engine.Question) ([]chatReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rs []chatReply
	for _, q := range waiting {
		ts := q.Chat["slack"]
		if ts == "" {
			continue
		}
		u := s.api + "/conversations.replies?" + url.Values{"channel": {s.channel}, "ts": {ts}, "limit": {"50"}}.Encode()
		var out struct {
			slackAnswer
			Messages []struct {
				TS    string `json:"ts"`
				Text  string `json:"text"`
				User  string `json:"user"`
				BotID string `json:"bot_id"`
			} `json:"messages"`
		}
		if err := callJSON(ctx, s.client, http.MethodGet, u, s.token, nil, &out); err != nil {
			return rs, err
		}
		if !out.OK {
			return rs, fmt.Errorf("conversations.replies: %s", out.Error)
		}
		for _, m := range out.Messages {
			if m.TS == ts || s.seen[m.TS] || m.BotID != "" || (s.botUser != "" && m.User == s.botUser) || strings.TrimSpace(m.Text) == "" {
				continue
			}
			s.seen[m.TS] = true
			rs = append(rs, chatReply{question: q.ID, text: m.Text, by: "slack (" + m.User + ")"})
			break
		}
	}
	return rs, nil
}
