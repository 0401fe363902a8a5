package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ralph-loop/ralph/internal/iostreams"
	"github.com/ralph-loop/ralph/internal/mcp"
)

// internalWords are names of the documents ralph was built from, which
// mean nothing to a user: "seed 001", "Seed 002's metadata", "the seed's
// layout", "issue 16". Help and docs name a thing by what it is (run
// folders, the codetether-style PRD, the pagent pipeline).
var internalWords = regexp.MustCompile(`(?i:\bseeds?('s)?[ -]*\d+|\bthe seeds?('s)?\b|\bissues? #?\d+|\bissue notes?\b)|\bSeeds?\b`)

// helpTexts is every text `ralph` shows about itself: each command's Short,
// Long and Example and each flag's usage, by where it is shown.
func helpTexts(root *cobra.Command) map[string]string {
	texts := map[string]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		p := c.CommandPath()
		texts[p+" (Short)"] = c.Short
		texts[p+" (Long)"] = c.Long
		texts[p+" (Example)"] = c.Example
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(fl *pflag.Flag) { texts[p+" --"+fl.Name] = fl.Usage })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return texts
}

// mcpTexts is what the MCP server tells a client about its tools and
// resources.
func mcpTexts(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	ios, _, _, _ := iostreams.Test()
	srv := mcp.NewServer(MCPServerOptions(&Factory{IO: ios, Getwd: func() (string, error) { return dir, nil }}, dir))
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	texts := map[string]string{}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		texts["mcp tool "+tool.Name] = tool.Description
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Resources {
		texts["mcp resource "+r.URI] = r.Description
	}
	if len(tools.Tools) == 0 {
		t.Fatal("the MCP server lists no tools")
	}
	return texts
}

func checkWords(t *testing.T, texts map[string]string) {
	t.Helper()
	for where, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			if m := internalWords.FindString(line); m != "" {
				t.Errorf("%s names an internal document (%q): %s", where, m, strings.TrimSpace(line))
			}
		}
	}
}

func TestHelpNamesNoInternalDocument(t *testing.T) {
	texts := helpTexts(newCmdRoot(testFactory(t)))
	if len(texts) < 100 {
		t.Fatalf("only %d help texts found: the walk missed the command tree", len(texts))
	}
	for k, v := range mcpTexts(t) {
		texts[k] = v
	}
	checkWords(t, texts)
}

func TestDocsNameNoInternalDocument(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	if len(files) < 10 {
		t.Fatalf("found only %v", files)
	}
	texts := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			texts[fmt.Sprintf("%s:%d", filepath.Base(f), i+1)] = line
		}
	}
	checkWords(t, texts)
}

// The words test itself: what it must catch, and what it must let through.
func TestInternalWords(t *testing.T) {
	for _, s := range []string{"seed 001's run folders", "Seed 002's metadata", "the seed's layout", "(seed 003)", "issue 16", "see the issue notes", "seed-001 run folders", "Seeds"} {
		if !internalWords.MatchString(s) {
			t.Errorf("%q is not caught", s)
		}
	}
	for _, s := range []string{"run folders", "the codetether-style PRD", "-seed repeats a campaign", "seed items done before it", "issues a token"} {
		if internalWords.MatchString(s) {
			t.Errorf("%q is caught", s)
		}
	}
}

// The README and the docs link to each other's pages: every relative link
// must name a file that exists.
func TestDocsLinksResolve(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "://") {
				continue
			}
			n++
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), m[1])); err != nil {
				t.Errorf("%s links to %s, which does not exist", filepath.Base(f), m[1])
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d links found", n)
	}
}
