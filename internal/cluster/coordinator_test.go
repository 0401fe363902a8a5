package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// A remote given as a local path works from every worktree and on the
// workers: it is made absolute; URLs and host:path stay as given.
func TestAbsRemote(t *testing.T) {
	wd, _ := os.Getwd()
	for in, want := range map[string]string{
		"../remote.git":               filepath.Join(filepath.Dir(wd), "remote.git"),
		"remote.git":                  filepath.Join(wd, "remote.git"),
		"/srv/git/app.git":            "/srv/git/app.git",
		"git@host:team/app.git":       "git@host:team/app.git",
		"host:app.git":                "host:app.git",
		"ssh://git@host/team/app.git": "ssh://git@host/team/app.git",
		"https://git.example/app.git": "https://git.example/app.git",
		"file:///srv/git/app.git":     "file:///srv/git/app.git",
		"./odd:name/app.git":          filepath.Join(wd, "odd:name/app.git"),
	} {
		if got := AbsRemote(in); got != want {
			t.Errorf("AbsRemote(%q) = %q, want %q", in, got, want)
		}
	}
}
