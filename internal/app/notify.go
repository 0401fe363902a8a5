package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// notifies reports whether people are told about ev: the run's end
// (done, blocked, out of budget, stopped), an item given up on, a
// rate-limit pause, a plan that waits for a person's approval, an
// agent's question to a person (and one nobody answered in time).
func notifies(ev engine.Event) bool {
	switch ev.Type {
	case "run_stopped", "item_blocked", "rate_limited", "question_asked", "question_timed_out":
		return true
	case "plan_written":
		return ev.Data["auto_approved"] != true
	}
	return false
}

// defaultNotifyTimeout bounds one notification, and the wait for the
// last ones when the run ends.
const defaultNotifyTimeout = 10 * time.Second

// notifier sends the events people are told about to every target, in
// the background: a slow or failing target is logged — an event in
// events.jsonl and a line — never fatal, and never holds the run.
type notifier struct {
	targets []notifyTarget
	repo    string
	paths   engine.Paths
	events  string // the run's events.jsonl, where failures are recorded
	timeout time.Duration
	logf    func(string)
	wg      sync.WaitGroup
	// chats are the targets where a reply answers an agent's question
	// (chat.go): Telegram, and Slack with a bot token.
	chats []chat
}

// notifyTarget is one place notifications go.
type notifyTarget struct {
	name string
	send func(ctx context.Context, n notification, body []byte) error
	// secrets are taken out of its errors (a bot token in a URL).
	secrets []string
}

// notification is what a webhook or the command receives: the event,
// and the repository it is about.
type notification struct {
	engine.Event
	Repo string `json:"repo"`
}

// text is the notification as one line for people (chat, mail).
func (n notification) text() string {
	msg := n.Message
	if msg == "" {
		msg = n.Type
	}
	return fmt.Sprintf("ralph · %s · %s: %s", filepath.Base(n.Repo), strings.ReplaceAll(n.Type, "_", " "), msg)
}

func (n *notifier) event(ev engine.Event) {
	if n == nil || !notifies(ev) {
		return
	}
	nt := notification{Event: ev, Repo: n.repo}
	body, err := json.Marshal(nt)
	if err != nil {
		return
	}
	for _, t := range n.targets {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
			defer cancel()
			if err := t.send(ctx, nt, body); err != nil {
				msg := err.Error()
				for _, s := range t.secrets {
					if s != "" {
						msg = strings.ReplaceAll(msg, s, "[masked]")
					}
				}
				n.failed("notify "+t.name, msg)
			}
		}()
	}
}

func (n *notifier) failed(what, err string) {
	msg := fmt.Sprintf("%s failed: %s (the run goes on)", what, err)
	_ = store.AppendJSONL(n.events, engine.Event{Type: "notify_failed", Time: time.Now().UTC(), Message: msg})
	if n.logf != nil {
		n.logf(msg)
	}
}

// wait lets the last notifications go out (the run's end), bounded.
func (n *notifier) wait() {
	if n == nil {
		return
	}
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(n.timeout):
	}
}

// newNotifier builds the targets: webhooks and the command (flags or
// config), and the config's Slack, Telegram and email. Nil when there
// is none.
func newNotifier(c config.Notify, webhooks []string, command, repo string, paths engine.Paths, runner proc.Runner, logf func(string)) (*notifier, error) {
	n := &notifier{repo: repo, paths: paths, events: paths.Events, timeout: time.Duration(c.Timeout), logf: logf}
	if n.timeout <= 0 {
		n.timeout = defaultNotifyTimeout
	}
	client := &http.Client{}
	for _, u := range webhooks {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, usage.Errorf("--notify %q: want an http:// or https:// URL", u)
		}
		n.targets = append(n.targets, notifyTarget{name: u, send: func(ctx context.Context, _ notification, body []byte) error {
			return postJSON(ctx, client, u, body)
		}})
	}
	if command != "" {
		n.targets = append(n.targets, notifyTarget{name: "command", send: func(ctx context.Context, _ notification, body []byte) error {
			var errb strings.Builder
			res, err := runner.Run(ctx, proc.Cmd{Argv: []string{"sh", "-c", command}, Dir: repo, Stdin: bytes.NewReader(body), Stderr: &errb})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(errb.String()))
			}
			return err
		}})
	}
	if s := c.Slack; s != nil && s.BotTokenEnv != "" {
		sl, err := newSlackChat(s, client)
		if err != nil {
			return nil, err
		}
		n.chats = append(n.chats, sl)
		n.targets = append(n.targets, notifyTarget{name: "slack", secrets: []string{sl.token}, send: n.chatSend(sl)})
	} else if s != nil {
		hook, err := fromEnv("notify.slack", s.WebhookURLEnv, s.WebhookURL)
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, notifyTarget{name: "slack", secrets: []string{hook}, send: func(ctx context.Context, nt notification, _ []byte) error {
			b, _ := json.Marshal(map[string]string{"text": nt.text()})
			return postJSON(ctx, client, hook, b)
		}})
	}
	if tg := c.Telegram; tg != nil {
		t, err := newTelegramChat(tg, client)
		if err != nil {
			return nil, err
		}
		n.chats = append(n.chats, t)
		n.targets = append(n.targets, notifyTarget{name: "telegram", secrets: []string{t.token}, send: n.chatSend(t)})
	}
	if e := c.Email; e != nil {
		if e.SMTP == "" || e.From == "" || len(e.To) == 0 {
			return nil, usage.Errorf("notify.email: smtp, from and to are required")
		}
		var password string
		if e.Username != "" {
			p, err := fromEnv("notify.email", e.PasswordEnv, "")
			if err != nil {
				return nil, err
			}
			password = p
		}
		n.targets = append(n.targets, notifyTarget{name: "email", secrets: []string{password}, send: func(ctx context.Context, nt notification, _ []byte) error {
			return sendMail(ctx, e, password, nt)
		}})
	}
	if len(n.targets) == 0 {
		return nil, nil
	}
	return n, nil
}

// fromEnv is the secret in the variable env names, else given.
func fromEnv(section, env, given string) (string, error) {
	if env == "" {
		if given == "" {
			return "", usage.Errorf("%s: name the environment variable that holds its secret", section)
		}
		return given, nil
	}
	v := os.Getenv(env)
	if v == "" {
		return "", usage.Errorf("%s: the environment variable %s is not set", section, env)
	}
	return v, nil
}

// postJSON posts body to u; any answer but 2xx is an error. The error
// never carries the URL (it may hold a token).
func postJSON(ctx context.Context, client *http.Client, u string, body []byte) error {
	return callJSON(ctx, client, http.MethodPost, u, "", body, nil)
}

// callJSON sends body (nil: none) to u, with a bearer token when one is
// given, and decodes a 2xx answer's JSON into out (nil: not read). Any
// other answer is an error that never carries the URL (it may hold a
// token).
func callJSON(ctx context.Context, client *http.Client, method, u, bearer string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return errors.New("bad URL")
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "ralph")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out); err != nil {
			return fmt.Errorf("reading the answer: %v", err)
		}
	}
	return nil
}

// sendMail sends nt as a plain-text mail through e's SMTP server,
// within ctx's deadline.
func sendMail(ctx context.Context, e *config.Email, password string, nt notification) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", e.SMTP)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	host, _, _ := net.SplitHostPort(e.SMTP)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host}); err != nil {
			return err
		}
	}
	if e.Username != "" {
		// smtp.PlainAuth sends the password only over TLS or to this
		// machine.
		if err := c.Auth(smtp.PlainAuth("", e.Username, password, host)); err != nil {
			return err
		}
	}
	if err := c.Mail(e.From); err != nil {
		return err
	}
	for _, to := range e.To {
		if err := c.Rcpt(to); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	subject := strings.ReplaceAll(nt.text(), "\n", " ")
	if len(subject) > 150 {
		subject = subject[:150] + "…"
	}
	fmt.Fprintf(w, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s\r\n\r\nRepository: %s\r\nEvent: %s\r\n",
		e.From, strings.Join(e.To, ", "), subject, time.Now().Format(time.RFC1123Z), strings.ReplaceAll(nt.Message, "\n", "\r\n"), nt.Repo, nt.Type)
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
