package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-loop/ralph/internal/gate"
	"github.com/ralph-loop/ralph/internal/git"
)

// gateFilesCheck guards what the gates run beyond their command strings:
// the tracked files they run or are configured by (gate.Files: scripts,
// the Makefile, package.json's scripts, tool configs). Each is compared
// with its version at the item's base; an agent's change is put back and
// reported, unless a person allowed gate changes on the item. Files a
// gate only reads are the work, not the gate.
type gateFilesCheck struct{}

func (gateFilesCheck) Name() string { return "files the gates run" }
func (gateFilesCheck) Stage() Stage { return Restore }

func (gateFilesCheck) Check(ctx context.Context, j *Judge, c *Case) Finding {
	if c.Base == "" || c.Claim.AllowGateChanges {
		return Finding{Skipped: true}
	}
	var cmds []string
	for _, g := range append(append([]gate.Gate{}, c.Claim.Gates...), c.Claim.Checks...) {
		cmds = append(cmds, g.Command)
	}
	cmds = append(cmds, c.Claim.Commands...)
	files := gate.Files(cmds)
	if len(files) == 0 {
		return Finding{Skipped: true}
	}
	repo := j.Repo.At(c.Dir)
	key := c.Base + "\x00" + strings.Join(files, "\x00")
	j.mu.Lock()
	blobs, ok := j.blobs[key]
	j.mu.Unlock()
	if !ok {
		var err error
		if blobs, err = repo.BlobIDs(ctx, c.Base, files); err != nil {
			return Finding{Fail: fail("checking the gates' files failed", fmt.Sprintf("reading the gates' files at %s: %v", short(c.Base), err))}
		}
		j.mu.Lock()
		if j.blobs == nil {
			j.blobs = map[string]map[string]string{}
		}
		j.blobs[key] = blobs
		j.mu.Unlock()
	}
	var f Finding
	for _, p := range files {
		want, tracked := blobs[p]
		if !tracked {
			continue // not in the repository: nothing the harness vouches for
		}
		now, err := os.ReadFile(filepath.Join(c.Dir, p))
		if err == nil && git.BlobID(now, want) == want {
			continue
		}
		if err == nil && p == gate.PackageJSON && sameScripts(ctx, repo, want, now) {
			continue // dependencies may change; the scripts the gates run may not
		}
		if rerr := repo.RestorePath(ctx, c.Base, p); rerr != nil {
			return Finding{Tampered: f.Tampered, Fail: fail("checking the gates' files failed", fmt.Sprintf("restoring %s: %v", p, rerr))}
		}
		what := "changed"
		if err != nil {
			what = "removed"
		}
		f.Tampered = append(f.Tampered, fmt.Sprintf("the agent %s %s, which the gates run; restored from %s (a story may allow this with allow_gate_changes: true)", what, p, short(c.Base)))
	}
	return f
}

// sameScripts reports whether package.json's "scripts" are the same in
// blob id and in now.
func sameScripts(ctx context.Context, repo *git.Repo, id string, now []byte) bool {
	was, err := repo.Blob(ctx, id)
	if err != nil {
		return false
	}
	return bytes.Equal(jsonSection(was, "scripts"), jsonSection(now, "scripts"))
}

// jsonSection is key's value in a JSON object, compacted (nil when the
// document or the key is not there).
func jsonSection(doc []byte, key string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return nil
	}
	raw, ok := m[key]
	if !ok {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
