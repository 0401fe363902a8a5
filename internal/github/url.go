package github

import (
	"net/url"
	"strings"
)

// CommitURL is the page of commit sha on GitHub when remote (a git
// remote's URL: https, ssh or scp-like) is a repository on github.com, or
// "".
func CommitURL(remote, sha string) string {
	path := ""
	switch {
	case strings.HasPrefix(remote, "git@github.com:"):
		path = strings.TrimPrefix(remote, "git@github.com:")
	default:
		u, err := url.Parse(remote)
		if err != nil || !strings.EqualFold(u.Hostname(), "github.com") || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh" && u.Scheme != "git") {
			return ""
		}
		path = u.Path
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	parts := strings.Split(path, "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" || sha == "" {
		return ""
	}
	return "https://github.com/" + url.PathEscape(parts[0]) + "/" + url.PathEscape(parts[1]) + "/commit/" + url.PathEscape(sha)
}
