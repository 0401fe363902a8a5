package github

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// PullRequestBase is the base branch of pull request n.
func (g *GH) PullRequestBase(ctx context.Context, n int) (string, error) {
	out, err := g.run(ctx, "", "pr", "view", strconv.Itoa(n), "--json", "baseRefName")
	if err != nil {
		return "", err
	}
	var pr struct {
		BaseRefName string `json:"baseRefName"`
	}
	if err := json.Unmarshal(out, &pr); err != nil || pr.BaseRefName == "" {
		return "", fmt.Errorf("gh pr view %d: no base branch in its answer", n)
	}
	return pr.BaseRefName, nil
}

// ReviewPullRequest posts body as a review of pull request n: a comment,
// or with requestChanges a review that asks for changes.
func (g *GH) ReviewPullRequest(ctx context.Context, n int, body string, requestChanges bool) error {
	kind := "--comment"
	if requestChanges {
		kind = "--request-changes"
	}
	_, err := g.run(ctx, body, "pr", "review", strconv.Itoa(n), kind, "--body-file", "-")
	return err
}
