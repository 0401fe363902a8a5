// Package chattest is for tests only: a scripted chat on loopback that
// speaks the parts of the Telegram Bot API (sendMessage, getUpdates) and
// of the Slack Web API (chat.postMessage, conversations.replies) ralph
// uses to tell people and to hear their answers. Every message ralph
// sends is kept; a person's reply is put in with Reply.
package chattest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Message is one message ralph sent.
type Message struct {
	Chat     string `json:"chat"` // telegram | slack
	ID       string `json:"id"`   // telegram: message_id; slack: ts
	Text     string `json:"text"`
	Question bool   `json:"question"` // telegram: sent with force_reply
}

// Server is the scripted chat.
type Server struct {
	srv  *httptest.Server
	mu   sync.Mutex
	sent []Message
	// Telegram's updates, and Slack's replies by the ts of their thread.
	updates []map[string]any
	threads map[string][]map[string]any
	next    int
}

// Start serves the chat on a loopback port.
func Start() *Server {
	s := &Server{threads: map[string][]map[string]any{}, next: 100}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the chat's address: Telegram's api_url and Slack's api_url.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Sent are the messages ralph sent, oldest first.
func (s *Server) Sent() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.sent...)
}

// ChatID is the Telegram chat the bot talks in.
const ChatID = -100

// Reply is a person's reply in chat to the newest question ralph sent
// there (Telegram: a reply to its message; Slack: in its thread); with
// asMessage, on Telegram, a message of its own instead (text as typed).
func (s *Server) Reply(chat, text string, asMessage bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var q *Message
	for i := len(s.sent) - 1; i >= 0; i-- {
		if m := s.sent[i]; m.Chat == chat && (m.Question || chat == "slack" && strings.Contains(m.Text, "asks (")) {
			q = &s.sent[i]
			break
		}
	}
	if q == nil {
		return fmt.Errorf("no question was sent to %s", chat)
	}
	s.next++
	switch chat {
	case "telegram":
		msg := map[string]any{"message_id": s.next, "text": text, "chat": map[string]any{"id": ChatID}, "from": map[string]any{"username": "alice", "is_bot": false}}
		if !asMessage {
			var id int
			fmt.Sscan(q.ID, &id)
			msg["reply_to_message"] = map[string]any{"message_id": id}
		}
		s.updates = append(s.updates, map[string]any{"update_id": s.next, "message": msg})
	case "slack":
		s.threads[q.ID] = append(s.threads[q.ID], map[string]any{"ts": fmt.Sprintf("%d.000200", s.next), "text": text, "user": "UALICE"})
	}
	return nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var in map[string]any
	if r.Method == http.MethodPost {
		_ = json.NewDecoder(r.Body).Decode(&in)
	}
	reply := func(v any) { w.Header().Set("Content-Type", "application/json"); _ = json.NewEncoder(w).Encode(v) }
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/sendMessage") && strings.HasPrefix(p, "/bot"):
		s.next++
		_, question := in["reply_markup"]
		text, _ := in["text"].(string)
		s.sent = append(s.sent, Message{Chat: "telegram", ID: fmt.Sprint(s.next), Text: text, Question: question})
		reply(map[string]any{"ok": true, "result": map[string]any{"message_id": s.next, "chat": map[string]any{"id": ChatID}}})
	case strings.HasSuffix(p, "/getUpdates") && strings.HasPrefix(p, "/bot"):
		off, _ := in["offset"].(float64)
		var out []map[string]any
		for _, u := range s.updates {
			if float64(u["update_id"].(int)) >= off {
				out = append(out, u)
			}
		}
		reply(map[string]any{"ok": true, "result": out})
	case p == "/chat.postMessage":
		if r.Header.Get("Authorization") == "" {
			reply(map[string]any{"ok": false, "error": "not_authed"})
			return
		}
		s.next++
		ts := fmt.Sprintf("%d.000100", s.next)
		text, _ := in["text"].(string)
		s.sent = append(s.sent, Message{Chat: "slack", ID: ts, Text: text})
		reply(map[string]any{"ok": true, "ts": ts, "channel": in["channel"], "message": map[string]any{"user": "UBOT", "bot_id": "B1", "text": text}})
	case p == "/conversations.replies":
		ts := r.URL.Query().Get("ts")
		msgs := []map[string]any{{"ts": ts, "text": "the question", "user": "UBOT", "bot_id": "B1"}}
		reply(map[string]any{"ok": true, "messages": append(msgs, s.threads[ts]...)})
	default:
		http.NotFound(w, r)
	}
}
