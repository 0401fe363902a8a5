package app

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/testenv"
)

// request is one request a scripted server got.
type request struct {
	Path, ContentType string
	Body              map[string]any
}

// chatServer is a scripted Slack or Telegram endpoint on loopback that
// answers status and records what it got.
func chatServer(t *testing.T, status int) (*httptest.Server, func() []request) {
	var mu sync.Mutex
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, request{r.URL.Path, r.Header.Get("Content-Type"), body})
		mu.Unlock()
		w.WriteHeader(status)
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []request {
		mu.Lock()
		defer mu.Unlock()
		return append([]request(nil), got...)
	}
}

// mail is one message the scripted SMTP server took.
type mail struct {
	Auth, From string
	To         []string
	Data       string
}

// smtpServer is a scripted SMTP server on loopback: it offers AUTH PLAIN
// (no STARTTLS), takes every message and records it.
func smtpServer(t *testing.T) (string, func() []mail) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var got []mail
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				say := func(s string) { io.WriteString(c, s+"\r\n") }
				say("220 scripted ESMTP")
				var m mail
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					line = strings.TrimRight(line, "\r\n")
					verb := strings.ToUpper(strings.Fields(line + " x")[0])
					switch verb {
					case "EHLO", "HELO":
						say("250-scripted")
						say("250 AUTH PLAIN")
					case "AUTH":
						b, _ := base64.StdEncoding.DecodeString(strings.Fields(line)[2])
						m.Auth = strings.ReplaceAll(string(b), "\x00", "|")
						say("235 ok")
					case "MAIL":
						m.From = line
						say("250 ok")
					case "RCPT":
						m.To = append(m.To, line)
						say("250 ok")
					case "DATA":
						say("354 go on")
						var b strings.Builder
						for {
							l, err := r.ReadString('\n')
							if err != nil || l == ".\r\n" {
								break
							}
							b.WriteString(l)
						}
						m.Data = b.String()
						mu.Lock()
						got = append(got, m)
						mu.Unlock()
						say("250 queued")
					case "QUIT":
						say("221 bye")
						return
					default:
						say("250 ok")
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), func() []mail {
		mu.Lock()
		defer mu.Unlock()
		return append([]mail(nil), got...)
	}
}

func newTestNotifier(t *testing.T, c config.Notify, webhooks []string, command string) (*notifier, engine.Paths, *testenv.LockedBuffer) {
	t.Helper()
	p := engine.PathsFor(t.TempDir())
	os.MkdirAll(p.Dir, 0o755)
	logs := &testenv.LockedBuffer{}
	n, err := newNotifier(c, webhooks, command, p.Root, p, proc.Exec{}, func(s string) { io.WriteString(logs, s+"\n") })
	if err != nil {
		t.Fatal(err)
	}
	return n, p, logs
}

var blocked = engine.Event{Type: "item_blocked", Item: "S-2", Message: "S-2 blocked after 3 attempts"}

// Slack gets an incoming-webhook payload ({"text": …}), Telegram the Bot
// API's sendMessage on the bot's path, email a mail over SMTP with the
// password from the environment; the webhook the event as JSON, the
// command on its stdin. Only the events people are told about go out.
func TestNotifyTargets(t *testing.T) {
	slack, slackGot := chatServer(t, 200)
	tg, tgGot := chatServer(t, 200)
	hook, hookGot := chatServer(t, 200)
	smtpAddr, mails := smtpServer(t)
	t.Setenv("TEST_SLACK_URL", slack.URL+"/services/T0/B0/xyz")
	t.Setenv("TEST_TG_TOKEN", "123:bot-secret")
	t.Setenv("TEST_SMTP_PASSWORD", "pa55")
	out := t.TempDir() + "/cmd.json"
	n, p, logs := newTestNotifier(t, config.Notify{
		Slack:    &config.Slack{WebhookURLEnv: "TEST_SLACK_URL"},
		Telegram: &config.Telegram{TokenEnv: "TEST_TG_TOKEN", ChatID: "-100", APIURL: tg.URL},
		Email:    &config.Email{SMTP: smtpAddr, From: "ralph@example.com", To: []string{"me@example.com", "you@example.com"}, Username: "me", PasswordEnv: "TEST_SMTP_PASSWORD"},
	}, []string{hook.URL + "/hook"}, "cat >> "+out)
	n.event(engine.Event{Type: "iteration_started", Item: "S-1"})
	n.event(engine.Event{Type: "plan_written", Item: "S-1", Data: map[string]any{"auto_approved": true}})
	n.event(blocked)
	n.event(engine.Event{Type: "plan_written", Item: "S-3", Message: "S-3: plan written; it waits for `ralph approve S-3`", Data: map[string]any{"auto_approved": false}})
	n.wait()

	text := "ralph · " + strings.TrimPrefix(p.Root, p.Root[:strings.LastIndex(p.Root, "/")+1]) + " · item blocked: S-2 blocked after 3 attempts"
	if g := slackGot(); len(g) != 2 || g[0].Path != "/services/T0/B0/xyz" || g[0].ContentType != "application/json" || (g[0].Body["text"] != text && g[1].Body["text"] != text) {
		t.Errorf("slack got %+v, want %q", g, text)
	}
	if g := tgGot(); len(g) != 2 || g[0].Path != "/bot123:bot-secret/sendMessage" || g[0].Body["chat_id"] != "-100" || (g[0].Body["text"] != text && g[1].Body["text"] != text) {
		t.Errorf("telegram got %+v", g)
	}
	if g := hookGot(); len(g) != 2 || g[0].Path != "/hook" || !strings.Contains(g[0].Body["type"].(string)+g[1].Body["type"].(string), "item_blocked") || g[0].Body["repo"] != p.Root {
		t.Errorf("webhook got %+v", g)
	}
	ms := mails()
	if len(ms) != 2 || ms[0].Auth != "|me|pa55" || ms[0].From != "MAIL FROM:<ralph@example.com>" || len(ms[0].To) != 2 || ms[0].To[1] != "RCPT TO:<you@example.com>" {
		t.Fatalf("mails %+v", ms)
	}
	all := ms[0].Data + ms[1].Data
	if !strings.Contains(all, "Subject: "+text+"\r\n") || !strings.Contains(all, "S-3: plan written; it waits") || !strings.Contains(all, "Event: item_blocked") {
		t.Errorf("mail data:\n%s", all)
	}
	if b, _ := os.ReadFile(out); strings.Count(string(b), `"type":"item_blocked"`) != 1 || strings.Contains(string(b), "iteration_started") {
		t.Errorf("the command got %s", b)
	}
	if logs.String() != "" {
		t.Errorf("failures: %s", logs)
	}
}

// A failing target and a slow one: each is logged (an event, a line)
// without its secret, and neither holds the run: event returns at once,
// wait returns at the timeout.
func TestNotifyFailuresNeverStall(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	down, _ := chatServer(t, 500)
	t.Setenv("TEST_TG_TOKEN", "999:very-secret-token")
	t.Setenv("TEST_SLACK_URL", slow.URL+"/services/SECRETPATH")
	n, p, logs := newTestNotifier(t, config.Notify{
		Timeout:  config.Duration(300 * time.Millisecond),
		Slack:    &config.Slack{WebhookURLEnv: "TEST_SLACK_URL"},
		Telegram: &config.Telegram{TokenEnv: "TEST_TG_TOKEN", ChatID: "1", APIURL: down.URL},
		Email:    &config.Email{SMTP: "127.0.0.1:1", From: "a@b", To: []string{"c@d"}},
	}, nil, "")
	start := time.Now()
	n.event(blocked)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("event took %s", d)
	}
	n.wait()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("wait took %s", d)
	}
	time.Sleep(100 * time.Millisecond) // the slow one's failure is logged as its context ends
	b, _ := os.ReadFile(p.Events)
	for _, want := range []string{"notify slack failed: context deadline exceeded (the run goes on)", "notify telegram failed: HTTP 500", "notify email failed: dial tcp 127.0.0.1:1"} {
		if !strings.Contains(string(b), want) || !strings.Contains(logs.String(), want) {
			t.Errorf("no %q in the events and the lines:\n%s\n%s", want, b, logs)
		}
	}
	if strings.Contains(string(b)+logs.String(), "very-secret-token") || strings.Contains(string(b)+logs.String(), "SECRETPATH") {
		t.Errorf("a secret in the failures:\n%s", b)
	}
}

// The secrets come from the environment: a variable that is not set, a
// target without its fields, are errors before the run starts.
func TestNotifyConfigErrors(t *testing.T) {
	p := engine.PathsFor(t.TempDir())
	for _, tc := range []struct {
		c    config.Notify
		want string
	}{
		{config.Notify{Telegram: &config.Telegram{TokenEnv: "TEST_UNSET_VAR", ChatID: "1"}}, "TEST_UNSET_VAR is not set"},
		{config.Notify{Telegram: &config.Telegram{ChatID: "1"}}, "name the environment variable"},
		{config.Notify{Slack: &config.Slack{}}, "notify.slack: name the environment variable"},
		{config.Notify{Email: &config.Email{SMTP: "h:25"}}, "smtp, from and to are required"},
		{config.Notify{Email: &config.Email{SMTP: "h:25", From: "a", To: []string{"b"}, Username: "u", PasswordEnv: "TEST_UNSET_VAR"}}, "TEST_UNSET_VAR is not set"},
	} {
		_, err := newNotifier(tc.c, nil, "", p.Root, p, proc.Exec{}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v (want %q)", tc.c, err, tc.want)
		}
	}
	if n, err := newNotifier(config.Notify{}, nil, "", p.Root, p, proc.Exec{}, nil); n != nil || err != nil {
		t.Errorf("no target: %v %v", n, err)
	}
}
