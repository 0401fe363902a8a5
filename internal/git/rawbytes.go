package git

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// NotAsStaged lists the paths whose staged blob is not the bytes the
// work tree holds: a clean filter, an end-of-line or encoding conversion
// from the attributes, or anything else between the file and the index
// changed them. The gates run on the work tree's bytes, so a commit of
// such an index would hold bytes no gate saw. Only the paths touched
// reports (the files written since the run started, say) are read and
// hashed; the blob ids are computed here from the raw bytes (what `git
// hash-object --no-filters` prints), so one git call lists the index and
// no filter runs.
func (r *Repo) NotAsStaged(ctx context.Context, touched func(path string) bool) ([]string, error) {
	out, err := r.Run(ctx, "ls-files", "--stage", "-z")
	if err != nil {
		return nil, err
	}
	var differ []string
	for _, rec := range strings.Split(out, "\x00") {
		// "<mode> <id> <stage>\t<path>"
		meta, path, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || !touched(path) {
			continue
		}
		mode, id := f[0], f[1]
		var content []byte
		switch mode {
		case "100644", "100755":
			content, err = os.ReadFile(filepath.Join(r.Dir, path))
		case "120000":
			var target string
			target, err = os.Readlink(filepath.Join(r.Dir, path))
			content = []byte(target)
		default:
			continue // a submodule: no bytes of ours
		}
		if err != nil || blobID(content, len(id)) != id {
			differ = append(differ, path)
		}
	}
	return differ, nil
}

// blobID is git's object id of a blob holding content, in the repository's
// hash (told by the length of its ids: 40 hex digits SHA-1, 64 SHA-256).
func blobID(content []byte, hexLen int) string {
	var h hash.Hash = sha1.New()
	if hexLen == 64 {
		h = sha256.New()
	}
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// IgnoredFiles lists the files git ignores in the tree (ignored or
// excluded, never tracked), each one, outside skip (a folder such as
// ralph's own .ralph).
func (r *Repo) IgnoredFiles(ctx context.Context, skip string) ([]string, error) {
	out, err := r.Run(ctx, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--", ".", ":(exclude)"+skip)
	return splitZ(out), err
}

// UntrackedFiles lists the files in the tree that are neither tracked,
// staged nor ignored.
func (r *Repo) UntrackedFiles(ctx context.Context) ([]string, error) {
	out, err := r.Run(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	return splitZ(out), err
}

func splitZ(out string) []string {
	var paths []string
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

// WrittenSince reports whether the file at path was written, renamed or
// had its mode changed at or after since (a missing file: true).
func WrittenSince(path string, since time.Time) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return true
	}
	return !ChangeTime(fi).Before(since)
}
