package ghtest

import (
	"fmt"
	"strings"
)

// operation answers one GraphQL operation gh sends (by its name, or for
// mutations the field it calls). Called with s.mu held.
func (s *Server) operation(name, query string, vars map[string]any) (any, error) {
	input, _ := vars["input"].(map[string]any)
	switch {
	case name == "Issue_fields":
		return map[string]any{"Issue": map[string]any{"fields": fieldNames("id", "number", "title", "body", "state", "stateReason")}}, nil
	case name == "PullRequest_fields":
		return map[string]any{"PullRequest": map[string]any{"fields": fieldNames("id", "number", "title", "body", "state", "isDraft")}}, nil
	case name == "RepositoryInfo" || name == "RepositoryNetwork":
		return map[string]any{"repository": s.repository()}, nil
	case name == "IssueSearch":
		nodes := []any{}
		for _, n := range sortedKeys(s.issues) {
			if is := s.issues[n]; matches(is, str(vars["query"])) {
				nodes = append(nodes, s.issueNode(is))
			}
		}
		return map[string]any{
			"repository": map[string]any{"hasIssuesEnabled": true},
			"search":     map[string]any{"issueCount": len(nodes), "nodes": nodes, "pageInfo": map[string]any{"hasNextPage": false, "endCursor": ""}},
		}, nil
	case name == "IssueByNumber":
		n := num(vars["number"])
		repo := map[string]any{"hasIssuesEnabled": true}
		switch {
		case s.issues[n] != nil:
			repo["issue"] = s.issueNode(s.issues[n])
		case s.prs[n] != nil:
			repo["issue"] = s.prNode(s.prs[n])
		default:
			return nil, fmt.Errorf("Could not resolve to an issue or pull request with the number of %d.", n)
		}
		return map[string]any{"repository": repo}, nil
	case name == "CommentsForIssue":
		n, ok := s.subject(str(vars["id"]))
		if !ok {
			return nil, fmt.Errorf("Could not resolve to a node with the global id of %q", vars["id"])
		}
		// Decoded strictly: the comments connection only.
		return map[string]any{"node": map[string]any{"comments": s.issueNode(s.issues[n])["comments"]}}, nil
	case name == "PullRequestByNumber":
		pr := s.prs[num(vars["pr_number"])]
		if pr == nil {
			return nil, fmt.Errorf("Could not resolve to a PullRequest with the number of %v.", vars["pr_number"])
		}
		return map[string]any{"repository": map[string]any{"pullRequest": s.prNode(pr)}}, nil
	case name == "PullRequestProjectItems", name == "IssueProjectItems":
		// Decoded strictly (shurcooL/graphql): exactly the fields asked.
		empty := map[string]any{"projectItems": map[string]any{"nodes": []any{}, "pageInfo": map[string]any{"hasNextPage": false, "endCursor": ""}}}
		key := "pullRequest"
		if name == "IssueProjectItems" {
			key = "issue"
		}
		return map[string]any{"repository": map[string]any{key: empty}}, nil
	case name == "PullRequestForBranch" || name == "PullRequestList":
		head := str(vars["headRefName"]) + str(vars["headBranch"])
		nodes := []any{}
		for _, n := range sortedKeys(s.prs) {
			pr := s.prs[n]
			if (head == "" || pr.Head == head) && stateIn(prState(pr), vars["states"], vars["state"]) {
				nodes = append(nodes, s.prNode(pr))
			}
		}
		return map[string]any{"repository": map[string]any{"pullRequests": map[string]any{
			"totalCount": len(nodes), "nodes": nodes, "pageInfo": map[string]any{"hasNextPage": false, "endCursor": ""}}}}, nil
	case strings.Contains(query, "addComment("):
		n, ok := s.subject(str(input["subjectId"]))
		if !ok {
			return nil, fmt.Errorf("Could not resolve to a node with the global id of %q", input["subjectId"])
		}
		s.issues[n].Comments = append(s.issues[n].Comments, str(input["body"]))
		url := fmt.Sprintf("https://%s/%s/%s/issues/%d#issuecomment-%d", s.Host, s.Owner, s.Name, n, len(s.issues[n].Comments))
		return map[string]any{"addComment": map[string]any{"commentEdge": map[string]any{"node": map[string]any{"url": url}}}}, nil
	case strings.Contains(query, "closeIssue("):
		n, ok := s.subject(str(input["issueId"]))
		if !ok {
			return nil, fmt.Errorf("Could not resolve to a node with the global id of %q", input["issueId"])
		}
		s.issues[n].Closed = true
		return map[string]any{"closeIssue": map[string]any{"issue": map[string]any{"id": input["issueId"]}}}, nil
	case strings.Contains(query, "createPullRequest("):
		n := s.next
		s.next++
		pr := &PR{Number: n, Title: str(input["title"]), Body: str(input["body"]), Head: str(input["headRefName"]), Base: str(input["baseRefName"]), Draft: input["draft"] == true}
		for _, other := range s.prs {
			if other.Head == pr.Head && !other.Closed {
				return nil, fmt.Errorf("A pull request already exists for %s:%s.", s.Owner, pr.Head)
			}
		}
		s.prs[n] = pr
		return map[string]any{"createPullRequest": map[string]any{"pullRequest": s.prNode(pr)}}, nil
	case strings.Contains(query, "updatePullRequest("):
		pr := s.prByID(str(input["pullRequestId"]))
		if pr == nil {
			return nil, fmt.Errorf("Could not resolve to a node with the global id of %q", input["pullRequestId"])
		}
		if v, ok := input["title"].(string); ok {
			pr.Title = v
		}
		if v, ok := input["body"].(string); ok {
			pr.Body = v
		}
		return map[string]any{"updatePullRequest": map[string]any{"__typename": "UpdatePullRequestPayload"}}, nil
	case strings.Contains(query, "addPullRequestReview("):
		pr := s.prByID(str(input["pullRequestId"]))
		if pr == nil {
			return nil, fmt.Errorf("Could not resolve to a node with the global id of %q", input["pullRequestId"])
		}
		pr.Reviews = append(pr.Reviews, Review{Event: str(input["event"]), Body: str(input["body"])})
		return map[string]any{"addPullRequestReview": map[string]any{"clientMutationId": nil}}, nil
	case strings.Contains(query, "markPullRequestReadyForReview("), strings.Contains(query, "convertPullRequestToDraft("):
		pr := s.prByID(str(input["pullRequestId"]))
		if pr == nil {
			return nil, fmt.Errorf("Could not resolve to a node with the global id of %q", input["pullRequestId"])
		}
		pr.Draft = strings.Contains(query, "convertPullRequestToDraft(")
		field := "markPullRequestReadyForReview"
		if pr.Draft {
			field = "convertPullRequestToDraft"
		}
		return map[string]any{field: map[string]any{"pullRequest": map[string]any{"id": input["pullRequestId"]}}}, nil
	}
	return nil, fmt.Errorf("ghtest: no answer for operation %q", name)
}

func (s *Server) repository() map[string]any {
	return map[string]any{
		"id": "R_1", "name": s.Name, "owner": map[string]any{"login": s.Owner},
		"hasIssuesEnabled": true, "viewerPermission": "ADMIN", "description": "",
		"defaultBranchRef": map[string]any{"name": "main"}, "parent": nil,
		"mergeCommitAllowed": true, "rebaseMergeAllowed": true, "squashMergeAllowed": true,
	}
}

func (s *Server) issueNode(is *Issue) map[string]any {
	labels := []any{}
	for _, l := range is.Labels {
		labels = append(labels, map[string]any{"name": l, "id": "L_" + l})
	}
	comments := []any{}
	for i, c := range is.Comments {
		comments = append(comments, map[string]any{"id": fmt.Sprintf("IC_%d_%d", is.Number, i+1), "body": c, "author": map[string]any{"login": "ralph-user"},
			"authorAssociation": "OWNER", "createdAt": "2026-01-01T00:00:00Z", "url": fmt.Sprintf("https://%s/%s/%s/issues/%d#issuecomment-%d", s.Host, s.Owner, s.Name, is.Number, i+1),
			"reactionGroups": []any{}})
	}
	state := "OPEN"
	if is.Closed {
		state = "CLOSED"
	}
	return map[string]any{
		"__typename": "Issue", "id": fmt.Sprintf("I_%d", is.Number), "number": is.Number,
		"title": is.Title, "body": is.Body, "state": state,
		"url":    fmt.Sprintf("https://%s/%s/%s/issues/%d", s.Host, s.Owner, s.Name, is.Number),
		"labels": map[string]any{"nodes": labels, "totalCount": len(labels)},
		"author": map[string]any{"login": "someone"}, "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
		"comments": map[string]any{"totalCount": len(is.Comments), "nodes": comments, "pageInfo": map[string]any{"hasNextPage": false, "endCursor": ""}},
	}
}

func (s *Server) prNode(pr *PR) map[string]any {
	return map[string]any{
		"__typename": "PullRequest", "id": fmt.Sprintf("PR_%d", pr.Number), "number": pr.Number,
		"title": pr.Title, "body": pr.Body, "state": prState(pr), "isDraft": pr.Draft,
		"url":         fmt.Sprintf("https://%s/%s/%s/pull/%d", s.Host, s.Owner, s.Name, pr.Number),
		"headRefName": pr.Head, "baseRefName": pr.Base, "isCrossRepository": false,
		"headRepositoryOwner": map[string]any{"login": s.Owner}, "headRepository": map[string]any{"name": s.Name},
		"labels": map[string]any{"nodes": []any{}}, "assignees": map[string]any{"nodes": []any{}},
		"reviewRequests": map[string]any{"nodes": []any{}}, "projectCards": map[string]any{"nodes": []any{}},
		"projectItems": map[string]any{"nodes": []any{}}, "milestone": nil,
	}
}

func prState(pr *PR) string {
	if pr.Closed {
		return "CLOSED"
	}
	return "OPEN"
}

// subject is the issue a node id names.
func (s *Server) subject(id string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(id, "I_%d", &n); err != nil || s.issues[n] == nil {
		return 0, false
	}
	return n, true
}

func (s *Server) prByID(id string) *PR {
	var n int
	if _, err := fmt.Sscanf(id, "PR_%d", &n); err != nil {
		return nil
	}
	return s.prs[n]
}

// matches is GitHub's search, as far as tests need it: label:X,
// is:open|closed, is:issue, repo:… (ignored: one repository), sort:…
// (ignored), and other words found in the title or body.
func matches(is *Issue, query string) bool {
	for _, w := range strings.Fields(query) {
		k, v, _ := strings.Cut(w, ":")
		v = strings.Trim(v, `"`)
		switch {
		case k == "label":
			found := false
			for _, l := range is.Labels {
				found = found || strings.EqualFold(l, v)
			}
			if !found {
				return false
			}
		case k == "is" && v == "open", k == "state" && v == "open":
			if is.Closed {
				return false
			}
		case k == "is" && v == "closed", k == "state" && v == "closed":
			if !is.Closed {
				return false
			}
		case k == "is", k == "repo", k == "sort", k == "type":
		default:
			if !strings.Contains(strings.ToLower(is.Title+" "+is.Body), strings.ToLower(w)) {
				return false
			}
		}
	}
	return true
}

func stateIn(state string, filters ...any) bool {
	for _, f := range filters {
		switch v := f.(type) {
		case []any:
			for _, x := range v {
				if x == state {
					return true
				}
			}
			return false
		case string:
			return v == state
		}
	}
	return true
}

func fieldNames(names ...string) []any {
	out := []any{}
	for _, n := range names {
		out = append(out, map[string]any{"name": n})
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}
