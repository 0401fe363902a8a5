package github

import "testing"

// A commit's page on GitHub from each way a remote names a repository
// there; any other host, or a URL that names no repository, has none.
func TestCommitURL(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	want := "https://github.com/ralph-loop/ralph/commit/" + sha
	for _, remote := range []string{"https://github.com/ralph-loop/ralph.git", "https://github.com/ralph-loop/ralph", "git@github.com:ralph-loop/ralph.git",
		"ssh://git@github.com/ralph-loop/ralph.git", "https://token@github.com/ralph-loop/ralph/"} {
		if got := CommitURL(remote, sha); got != want {
			t.Errorf("%s: %q", remote, got)
		}
	}
	for _, remote := range []string{"", "https://gitlab.com/a/b.git", "git@gitlab.com:a/b.git", "/srv/git/b.git", "https://github.com/a", "https://github.com/a/b/c", "https://github.com.evil.example/a/b"} {
		if got := CommitURL(remote, sha); got != "" {
			t.Errorf("%s: %q, want none", remote, got)
		}
	}
}
