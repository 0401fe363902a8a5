package git

import (
	"context"
	"strconv"
	"strings"
)

// What the dashboards ask of a repository to show a story's commit: read
// only, never the run's business.

// FileStat is one file a commit changed: lines added and deleted (a
// binary file counts none).
type FileStat struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
}

// FileStats is what rev changed against its first parent, file by file
// (`git show --numstat`; a root commit against the empty tree).
func (r *Repo) FileStats(ctx context.Context, rev string) ([]FileStat, error) {
	out, err := r.Run(ctx, "-c", "core.quotePath=false", "show", "--numstat", "--format=", "--no-renames", "--first-parent", rev, "--")
	if err != nil {
		return nil, err
	}
	var stats []FileStat
	for _, l := range lines(out) {
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 {
			continue
		}
		fs := FileStat{Path: f[2], Binary: f[0] == "-"}
		fs.Added, _ = strconv.Atoi(f[0])
		fs.Deleted, _ = strconv.Atoi(f[1])
		stats = append(stats, fs)
	}
	return stats, nil
}

// RemoteURL is the URL remote name fetches from, "" when there is no
// such remote.
func (r *Repo) RemoteURL(ctx context.Context, name string) string {
	out, err := r.Run(ctx, "remote", "get-url", "--", name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}
