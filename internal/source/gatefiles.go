package source

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
)

// gateFiles guards the control plane beyond the gate command strings: the
// tracked files the gates run or are configured by (gate.Files: scripts,
// Makefile, package.json's scripts, tool configs). They are compared with
// their versions in the last verified commit; an agent's change is put
// back and reported as tampering, unless the story allows gate changes.
// Reading a commit's blob ids is one git call, made once per commit and
// set of gates; the comparison itself hashes the files without git.
type gateFiles struct {
	mu    sync.Mutex
	blobs map[string]map[string]string // commit + files → path → blob id
}

// check compares the files of gates in the tree at repo with commit at and
// restores any that changed; it returns what it reported.
func (g *gateFiles) check(ctx context.Context, repo *git.Repo, at string, gates []gate.Gate, allow bool) ([]string, error) {
	if at == "" || allow {
		return nil, nil
	}
	var cmds []string
	for _, gt := range gates {
		cmds = append(cmds, gt.Command)
	}
	files := gate.Files(cmds)
	if len(files) == 0 {
		return nil, nil
	}
	key := at + "\x00" + strings.Join(files, "\x00")
	g.mu.Lock()
	blobs, ok := g.blobs[key]
	g.mu.Unlock()
	if !ok {
		var err error
		if blobs, err = repo.BlobIDs(ctx, at, files); err != nil {
			return nil, fmt.Errorf("reading the gates' files at %s: %w", short(at), err)
		}
		g.mu.Lock()
		if g.blobs == nil {
			g.blobs = map[string]map[string]string{}
		}
		g.blobs[key] = blobs
		g.mu.Unlock()
	}
	var tampered []string
	for _, p := range files {
		want, tracked := blobs[p]
		if !tracked {
			continue // not in the repository: nothing the harness vouches for
		}
		now, err := os.ReadFile(filepath.Join(repo.Dir, p))
		if err == nil && git.BlobID(now, want) == want {
			continue
		}
		if err == nil && p == gate.PackageJSON && sameScripts(ctx, repo, want, now) {
			continue // dependencies may change; the scripts the gates run may not
		}
		if rerr := repo.RestorePath(ctx, at, p); rerr != nil {
			return tampered, fmt.Errorf("restoring %s: %w", p, rerr)
		}
		what := "changed"
		if err != nil {
			what = "removed"
		}
		tampered = append(tampered, fmt.Sprintf("the agent %s %s, which the gates run; restored from %s (a story may allow this with allow_gate_changes: true)", what, p, short(at)))
	}
	return tampered, nil
}

// sameScripts reports whether package.json's "scripts" are the same in
// blob id and in now.
func sameScripts(ctx context.Context, repo *git.Repo, id string, now []byte) bool {
	was, err := repo.Blob(ctx, id)
	if err != nil {
		return false
	}
	var a, b struct {
		Scripts json.RawMessage `json:"scripts"`
	}
	if json.Unmarshal(was, &a) != nil || json.Unmarshal(now, &b) != nil {
		return false
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a.Scripts) != nil && len(a.Scripts) > 0 || json.Compact(&cb, b.Scripts) != nil && len(b.Scripts) > 0 {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
