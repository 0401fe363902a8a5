package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ralph-loop/ralph/internal/cli"
	"github.com/ralph-loop/ralph/internal/iostreams"
	"github.com/ralph-loop/ralph/internal/mcp"
)

// mcpSession connects a go-sdk client to the server over dir, in process,
// with the command line's own commands behind its tools.
func mcpSession(t *testing.T, dir string) *sdk.ClientSession {
	t.Helper()
	return mcpSessionAs(t, dir, "test")
}

// mcpSessionAs is mcpSession with a client of the given name.
func mcpSessionAs(t *testing.T, dir, client string) *sdk.ClientSession {
	t.Helper()
	streams, _, _, _ := iostreams.Test()
	srv := mcp.NewServer(cli.MCPServerOptions(&cli.Factory{IO: streams, Getwd: func() (string, error) { return dir, nil }}, dir))
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: client}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return dir
}

// call calls a tool and returns its text and whether it was an error.
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	var structured map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &structured)
	}
	return text.String(), structured, res.IsError
}

// Every tool but run (its process is tested end to end) and every
// resource, with the go-sdk client: the CLI's results, and its errors as
// tool errors with the CLI's message and exit code, nothing written.
func TestMCPTools(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // the guidance key
	dir := gitRepo(t)
	cs := mcpSession(t, dir)

	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.InputSchema == nil {
			t.Errorf("%s has no input schema", tool.Name)
		}
	}
	for _, want := range []string{"run", "status", "create-prd", "create_prd", "validate_prd", "stop", "approve", "guide", "task_add", "task_next", "task_complete", "task_list", "tail"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("no tool %s (have %v)", want, names)
		}
	}

	// create_prd, then validate_prd.
	text, _, isErr := call(t, cs, "create_prd", map[string]any{"project": "todo", "feature": "Priorities"})
	if isErr {
		t.Fatalf("create_prd: %s", text)
	}
	if _, err := os.Stat(filepath.Join(dir, "prd.json")); err != nil {
		t.Fatal("create_prd wrote nothing")
	}
	text, _, isErr = call(t, cs, "create_prd", map[string]any{"project": "todo", "feature": "Priorities"})
	if !isErr || !strings.Contains(text, "already exists (use --force to overwrite)") || !strings.Contains(text, "exit code 2") {
		t.Errorf("a second create_prd: %v %s", isErr, text)
	}
	// The template in a repository with nothing init finds has no gate:
	// refused as run refuses it, unless no_gates.
	text, _, isErr = call(t, cs, "validate_prd", map[string]any{})
	if !isErr || !strings.Contains(text, "no quality gate") || !strings.Contains(text, "exit code 2") {
		t.Errorf("validate_prd of a gateless PRD: %v %s", isErr, text)
	}
	text, _, isErr = call(t, cs, "validate_prd", map[string]any{"no_gates": true})
	if isErr || !strings.Contains(text, "prd.json: valid") {
		t.Errorf("validate_prd: %v %s", isErr, text)
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"project":"p","user_stories":[{"id":"A","title":"a","depends_on":["A"]}]}`), 0o644)
	text, _, isErr = call(t, cs, "validate_prd", map[string]any{"path": "bad.json"})
	if !isErr || !strings.Contains(text, "depends on itself") || !strings.Contains(text, "exit code 2") {
		t.Errorf("validate_prd of a cycle: %v %s", isErr, text)
	}

	// create-prd, codetether's name: prd_path, and the quality checks
	// the repository has (here a Makefile's test target).
	os.WriteFile(filepath.Join(dir, "Makefile"), []byte("test:\n\ttrue\n"), 0o644)
	if text, _, isErr := call(t, cs, "create-prd", map[string]any{"project": "MyProject", "feature": "New Feature", "prd_path": "seeded.json"}); isErr {
		t.Fatalf("create-prd: %s", text)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "seeded.json")); err != nil || !strings.Contains(string(b), `"test": "make test"`) || !strings.Contains(string(b), `"branch_name": "feature/new-feature"`) {
		t.Errorf("create-prd wrote %s (%v)", b, err)
	}

	// Bad arguments: a clear error, nothing written.
	if text, _, isErr := call(t, cs, "create_prd", map[string]any{"project": "x", "feature": "y", "path": "sub/dir/p.json", "repo": "nowhere"}); !isErr || !strings.Contains(text, `repo "nowhere": not a folder`) {
		t.Errorf("a missing repo: %v %s", isErr, text)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); err == nil {
		t.Error("a failed call wrote something")
	}
	if text, _, isErr := call(t, cs, "tail", map[string]any{"n": "many"}); !isErr {
		t.Errorf("tail with a string n: %s", text)
	}

	// create-prd writes inside the repository only.
	outside := filepath.Join(t.TempDir(), "elsewhere.json")
	for _, p := range []string{"../escaped.json", outside} {
		if text, _, isErr := call(t, cs, "create-prd", map[string]any{"project": "x", "feature": "y", "prd_path": p}); !isErr || !strings.Contains(text, "is outside the repository") {
			t.Errorf("create-prd %s: %v %s", p, isErr, text)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escaped.json")); err == nil {
		t.Error("create-prd wrote outside the repository")
	}
	if _, err := os.Stat(outside); err == nil {
		t.Error("create-prd wrote to an absolute path outside the repository")
	}

	// No run yet: the PRD's totals, not started (prd.json, or the one
	// named).
	for args, branch := range map[string]string{"": "feature/priorities", "seeded.json": "feature/new-feature"} {
		in := map[string]any{}
		if args != "" {
			in["prd_path"] = args
		}
		text, out, isErr := call(t, cs, "status", in)
		if isErr || out["status"] != "not_started" || out["total"] != 1.0 || out["passed"] != 0.0 || out["all_passed"] != false ||
			out["ready_to_merge"] != false || out["feature_branch"] != branch || out["active"] != false {
			t.Errorf("status of a PRD without a run (%q): %v %s %v", args, isErr, text, out)
		}
		if items, _ := out["items"].([]any); len(items) != 1 || items[0].(map[string]any)["status"] != "pending" {
			t.Errorf("items %v", out["items"])
		}
	}
	// A story the file marks passed is marked, never passed, until a run
	// judges the mark by ralph's commits.
	b, _ := os.ReadFile(filepath.Join(dir, "seeded.json"))
	os.WriteFile(filepath.Join(dir, "marked.json"), []byte(strings.Replace(string(b), `"passes": false`, `"passes": true`, 1)), 0o644)
	if text, out, isErr := call(t, cs, "status", map[string]any{"prd_path": "marked.json"}); isErr || out["passed"] != 0.0 || out["marked"] != 1.0 || out["all_passed"] != false {
		t.Errorf("status of a PRD with a mark by hand: %v %s %v", isErr, text, out)
	} else if items, _ := out["items"].([]any); len(items) != 1 || items[0].(map[string]any)["status"] != "marked" {
		t.Errorf("items %v", out["items"])
	}
	if text, _, isErr := call(t, cs, "status", map[string]any{"prd_path": "missing.json"}); !isErr || !strings.Contains(text, "missing.json") {
		t.Errorf("status of a PRD that does not exist: %v %s", isErr, text)
	}
	if text, _, isErr := call(t, cs, "stop", map[string]any{}); !isErr || !strings.Contains(text, "no run is active") {
		t.Errorf("stop without a run: %v %s", isErr, text)
	}
	if text, _, isErr := call(t, cs, "approve", map[string]any{"id": "US-001"}); !isErr {
		t.Errorf("approve without a plan: %s", text)
	}

	// The task tools.
	if text, _, isErr := call(t, cs, "task_add", map[string]any{"title": "Parse the config"}); isErr || !strings.Contains(text, "A") {
		t.Fatalf("task_add: %v %s", isErr, text)
	}
	call(t, cs, "task_add", map[string]any{"title": "Check the ports"})
	if _, out, isErr := call(t, cs, "task_next", map[string]any{}); isErr || !strings.Contains(out["text"].(string), `"id":"A"`) {
		t.Errorf("task_next: %v %v", isErr, out)
	}
	if text, _, isErr := call(t, cs, "task_complete", map[string]any{"id": "A"}); isErr {
		t.Errorf("task_complete: %s", text)
	}
	if _, out, isErr := call(t, cs, "task_list", map[string]any{"status": "pending"}); isErr || strings.Contains(out["text"].(string), `"id":"A"`) || !strings.Contains(out["text"].(string), `"id":"B"`) {
		t.Errorf("task_list pending: %v %v", isErr, out)
	}
	if text, _, isErr := call(t, cs, "task_complete", map[string]any{"id": "Z"}); !isErr || !strings.Contains(text, "Z") {
		t.Errorf("task_complete of no task: %v %s", isErr, text)
	}

	// Resources: none yet; then the progress a run would write.
	if _, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "ralph://progress"}); err == nil {
		t.Error("ralph://progress without a run")
	}
	os.MkdirAll(filepath.Join(dir, ".ralph"), 0o700)
	os.WriteFile(filepath.Join(dir, ".ralph", "progress.md"), []byte("## entry\n"), 0o644)
	res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "ralph://progress"})
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "## entry\n" {
		t.Errorf("ralph://progress: %v %+v", err, res)
	}
	if _, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "ralph://transcript/9"}); err == nil {
		t.Error("a transcript that does not exist")
	}

	// guide: the CLI's `ralph guide`, kept for the next iterations.
	if text, _, isErr := call(t, cs, "guide", map[string]any{"text": "prefer small commits", "item": "US-001"}); isErr || !strings.Contains(text, "g1") {
		t.Errorf("guide: %v %s", isErr, text)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".ralph", "guidance.jsonl")); err != nil || !strings.Contains(string(b), `"by":"the MCP guide tool"`) || !strings.Contains(string(b), "prefer small commits") {
		t.Errorf("guide kept: %v %s", err, b)
	}
	if text, _, isErr := call(t, cs, "guide", map[string]any{"text": " "}); !isErr || !strings.Contains(text, "empty") {
		t.Errorf("empty guidance: %v %s", isErr, text)
	}
}

// Codex turns a tool name's "-" into "_": offered both create-prd and
// create_prd it would show the model a hashed name. A Codex client is
// offered create_prd alone; other clients both names; either name works.
func TestMCPToolNamesForCodex(t *testing.T) {
	dir := gitRepo(t)
	names := func(cs *sdk.ClientSession) []string {
		var out []string
		for tool, err := range cs.Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tool.Name)
		}
		return out
	}
	codex := mcpSessionAs(t, dir, "codex-mcp-client")
	got := names(codex)
	if slices.Contains(got, "create-prd") || !slices.Contains(got, "create_prd") {
		t.Errorf("Codex is offered %v", got)
	}
	if text, _, isErr := call(t, codex, "create-prd", map[string]any{"project": "p", "feature": "f"}); isErr {
		t.Errorf("create-prd by its other name: %s", text)
	}
	if got := names(mcpSessionAs(t, dir, "claude-code")); !slices.Contains(got, "create-prd") || !slices.Contains(got, "create_prd") {
		t.Errorf("Claude Code is offered %v", got)
	}
}
