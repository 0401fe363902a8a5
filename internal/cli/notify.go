package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/proc"
	"github.com/ralph-loop/ralph/internal/store"
)

// notifyTypes are the events people are told about: the run's end (done,
// blocked, out of budget, stopped), an item given up on, a rate-limit
// pause.
var notifyTypes = map[string]bool{"run_stopped": true, "item_blocked": true, "rate_limited": true}

// notifyTimeout bounds one notification, and the wait for the last ones
// when the run ends.
const notifyTimeout = 10 * time.Second

// notifier posts the events people are told about to webhooks (a JSON
// POST) and hands them to a command (on stdin), in the background: a
// failure is logged — an event in events.jsonl and a line — never fatal.
type notifier struct {
	urls    []string
	command string
	repo    string
	events  string // the run's events.jsonl, where failures are recorded
	runner  proc.Runner
	client  *http.Client
	logf    func(string)
	wg      sync.WaitGroup
}

// notification is what a webhook or the command receives: the event,
// and the repository it is about.
type notification struct {
	engine.Event
	Repo string `json:"repo"`
}

func (n *notifier) event(ev engine.Event) {
	if n == nil || !notifyTypes[ev.Type] {
		return
	}
	body, err := json.Marshal(notification{Event: ev, Repo: n.repo})
	if err != nil {
		return
	}
	for _, u := range n.urls {
		n.wg.Add(1)
		go func(u string) {
			defer n.wg.Done()
			if err := n.post(u, body); err != nil {
				n.failed("notify "+u, err)
			}
		}(u)
	}
	if n.command != "" {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
			defer cancel()
			var errb strings.Builder
			res, err := n.runner.Run(ctx, proc.Cmd{Argv: []string{"sh", "-c", n.command}, Dir: n.repo, Stdin: bytes.NewReader(body), Stderr: &errb})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(errb.String()))
			}
			if err != nil {
				n.failed("notify_command", err)
			}
		}()
	}
}

func (n *notifier) post(url string, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ralph")
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	return nil
}

func (n *notifier) failed(what string, err error) {
	msg := fmt.Sprintf("%s failed: %v (the run goes on)", what, err)
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
	case <-time.After(notifyTimeout):
	}
}
