package store

import (
	"os"
	"path/filepath"
	"testing"
)

// Every way ralph writes in .ralph replaces a link someone else put there
// (a file or a folder on the way) instead of writing through it, and
// records it; outside .ralph a link is followed as before.
func TestOwnFolderLinksAreReplaced(t *testing.T) {
	root := t.TempDir()
	own := filepath.Join(root, "repo", ".ralph")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{own, outside, filepath.Join(outside, "dir")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	link := func(name, target string) string {
		p := filepath.Join(own, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bait := func(name string) string {
		p := filepath.Join(outside, name)
		if err := os.WriteFile(p, []byte("untouched\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ReplacedLinks()
	writes := map[string]func(p string) error{
		"events.jsonl": func(p string) error { return AppendJSONL(p, map[string]int{"a": 1}) },
		"progress.md":  func(p string) error { return AppendLog(p, []byte("entry")) },
		"state.json":   func(p string) error { return WriteJSON(p, map[string]int{"a": 1}) },
		"prompt.md":    func(p string) error { return WriteFileNoSync(p, []byte("prompt"), 0o600) },
		"0001.log": func(p string) error {
			c, err := OpenCapped(p, 0)
			if err != nil {
				return err
			}
			_, _ = c.Write([]byte("transcript"))
			return c.Close()
		},
	}
	for name, write := range writes {
		target := bait(name)
		p := link(name, target)
		if err := write(p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b, _ := os.ReadFile(target); string(b) != "untouched\n" {
			t.Errorf("%s: written through the link: %q", name, b)
		}
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: not ralph's own file after the write: %v %v", name, fi, err)
		}
	}
	// A folder on the way that is a link.
	link("transcripts", filepath.Join(outside, "dir"))
	if err := AppendLog(filepath.Join(own, "transcripts", "0002.log"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "dir", "0002.log")); err == nil {
		t.Error("written through a linked folder")
	}
	if got := len(ReplacedLinks()); got != len(writes)+1 {
		t.Errorf("recorded %d replaced links, want %d", got, len(writes)+1)
	}
	// Outside .ralph a user's link is theirs: followed.
	target := bait("user.md")
	user := filepath.Join(root, "repo", "user.md")
	if err := os.Symlink(target, user); err != nil {
		t.Fatal(err)
	}
	if err := AppendLog(user, []byte("more")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "untouched\nmore\n" {
		t.Errorf("a link outside .ralph was not followed: %q", b)
	}
}
