// Package github is ralph's side of GitHub, all of it through the user's
// own gh CLI (their login, never a token of ralph's): open issues become a
// harness-owned PRD (issues.go), passes and blocks are reported on them
// exactly once (report.go), and a run's feature branch becomes one pull
// request (pr.go). Every gh call is an argv list through proc; long texts
// go on stdin (--body-file -), never through a shell or the argument list.
package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-loop/ralph/internal/proc"
)

// GH runs the gh CLI in a repository.
type GH struct {
	Runner proc.Runner
	Dir    string
	// Env is gh's environment (nil: ralph's own).
	Env []string
	// Timeout bounds each call (default 2 minutes).
	Timeout time.Duration
}

// ErrNoGh says gh is not installed.
var ErrNoGh = errors.New("gh (the GitHub CLI) is not installed: install it (Debian/Ubuntu: apt-get install gh) and log in with `gh auth login`")

// run is one gh call; stdin ("" for none) is its standard input. The
// error carries gh's own message.
func (g *GH) run(ctx context.Context, stdin string, args ...string) ([]byte, error) {
	var out, errb bytes.Buffer
	c := proc.Cmd{Argv: append([]string{"gh"}, args...), Dir: g.Dir, Env: g.Env, Stdout: &out, Stderr: &errb, Timeout: g.Timeout}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	runner := g.Runner
	if runner == nil {
		runner = proc.Exec{}
	}
	res, err := runner.Run(ctx, c)
	if errors.Is(err, proc.ErrNotFound) {
		return nil, ErrNoGh
	}
	if err == nil && res.ExitCode != 0 {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		err = fmt.Errorf("gh %s: exit %d: %s", args[0]+" "+args[1], res.ExitCode, msg)
	}
	if err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Issue is an open issue as gh lists it.
type Issue struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	URL    string `json:"url"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

// ListIssues are the open issues a search query (e.g. label:ralph)
// matches, in number order.
func (g *GH) ListIssues(ctx context.Context, query string) ([]Issue, error) {
	out, err := g.run(ctx, "", "issue", "list", "--search", query, "--state", "open", "--json", "number,title,body,labels,url", "--limit", "1000")
	if err != nil {
		return nil, err
	}
	var list []Issue
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("gh issue list: unreadable answer: %w", err)
	}
	sortIssues(list)
	return list, nil
}

// Comment posts body on issue n.
func (g *GH) Comment(ctx context.Context, n int, body string) error {
	_, err := g.run(ctx, body, "issue", "comment", strconv.Itoa(n), "--body-file", "-")
	return err
}

// Commented says whether one of issue n's comments contains marker.
func (g *GH) Commented(ctx context.Context, n int, marker string) (bool, error) {
	out, err := g.run(ctx, "", "issue", "view", strconv.Itoa(n), "--json", "comments")
	if err != nil {
		return false, err
	}
	var v struct {
		Comments []struct {
			Body string `json:"body"`
		} `json:"comments"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return false, fmt.Errorf("gh issue view: unreadable answer: %w", err)
	}
	for _, c := range v.Comments {
		if strings.Contains(c.Body, marker) {
			return true, nil
		}
	}
	return false, nil
}

// Close closes issue n.
func (g *GH) Close(ctx context.Context, n int) error {
	_, err := g.run(ctx, "", "issue", "close", strconv.Itoa(n))
	return err
}

// PullRequest is an open pull request as gh lists it.
type PullRequest struct {
	Number  int    `json:"number"`
	URL     string `json:"url"`
	IsDraft bool   `json:"isDraft"`
}

// FindPR is the open pull request from branch head (nil: none).
func (g *GH) FindPR(ctx context.Context, head string) (*PullRequest, error) {
	out, err := g.run(ctx, "", "pr", "list", "--head", head, "--state", "open", "--json", "number,url,isDraft")
	if err != nil {
		return nil, err
	}
	var list []PullRequest
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("gh pr list: unreadable answer: %w", err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	return &list[0], nil
}

// CreatePR opens a pull request from head into base ("": the
// repository's default branch) and returns its URL.
func (g *GH) CreatePR(ctx context.Context, head, base, title, body string, draft bool) (string, error) {
	args := []string{"pr", "create", "--head", head, "--title", title, "--body-file", "-"}
	if base != "" {
		args = append(args, "--base", base)
	}
	if draft {
		args = append(args, "--draft")
	}
	out, err := g.run(ctx, body, args...)
	if err != nil {
		return "", err
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return "", nil
	}
	return lines[len(lines)-1], nil
}

// EditPR replaces pull request n's title and body.
func (g *GH) EditPR(ctx context.Context, n int, title, body string) error {
	_, err := g.run(ctx, body, "pr", "edit", strconv.Itoa(n), "--title", title, "--body-file", "-")
	return err
}

// SetDraft marks pull request n a draft, or ready for review.
func (g *GH) SetDraft(ctx context.Context, n int, draft bool) error {
	args := []string{"pr", "ready", strconv.Itoa(n)}
	if draft {
		args = append(args, "--undo")
	}
	_, err := g.run(ctx, "", args...)
	return err
}
