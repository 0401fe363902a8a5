package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ralph-loop/ralph/internal/iostreams"
	"github.com/ralph-loop/ralph/internal/testenv"
)

// bearer adds the token to every request of an MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// startMCPHTTP runs `ralph mcp --http` in dir on a free loopback port and
// returns its endpoint and what it printed.
func startMCPHTTP(t *testing.T, dir string, o MCPOptions) (url string, errb *testenv.LockedBuffer) {
	t.Helper()
	streams, _, _, _ := iostreams.Test()
	errb = &testenv.LockedBuffer{}
	streams.ErrOut = errb
	o.IO = &Factory{IO: streams, Getwd: func() (string, error) { return dir, nil }}
	o.HTTP = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runMCP(ctx, &o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runMCP: %v", err)
		}
	})
	for i := 0; i < 500 && url == ""; i++ {
		if _, rest, ok := strings.Cut(errb.String(), "at http://"); ok {
			url = "http://" + strings.Fields(rest)[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	if url == "" {
		t.Fatalf("no address printed: %q", errb.String())
	}
	return url, errb
}

// ralph mcp --http: the same server over streamable HTTP, for the holder
// of its token only, on this repository only.
func TestMCPOverHTTP(t *testing.T) {
	dir := t.TempDir() // prd new needs no repository
	other := t.TempDir()
	url, errb := startMCPHTTP(t, dir, MCPOptions{})
	tokenFile := filepath.Join(dir, ".ralph", "mcp-token")
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	b, _ := os.ReadFile(tokenFile)
	token := strings.TrimSpace(string(b))
	if !strings.Contains(errb.String(), "(generated, shown once, kept in "+tokenFile+"): "+token) {
		t.Fatalf("the generated token was not printed:\n%s", errb)
	}
	ctx := t.Context()
	connect := func(hc *http.Client) (*sdk.ClientSession, error) {
		return sdk.NewClient(&sdk.Implementation{Name: "http"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	}

	// Attack: a client without the token, or with a wrong one.
	if cs, err := connect(nil); err == nil {
		cs.Close()
		t.Fatal("a client without the token connected")
	}
	if cs, err := connect(&http.Client{Transport: bearer{"0123456789abcdef0123456789abcdef"}}); err == nil {
		cs.Close()
		t.Fatal("a client with a wrong token connected")
	}
	// Attack: the right token from a page on another origin, or under a
	// rebound name.
	for _, h := range []struct{ header, value string }{{"Origin", "http://evil.example"}, {"Origin", "null"}, {"Host", "evil.example:80"}} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if h.header == "Host" {
			req.Host = h.value
		} else {
			req.Header.Set(h.header, h.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s: status %d (want 403)", h.header, h.value, resp.StatusCode)
		}
	}

	cs, err := connect(&http.Client{Transport: bearer{token}})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		return text.String(), res.IsError
	}
	if text, isErr := call("create_prd", map[string]any{"project": "h", "feature": "over http"}); isErr {
		t.Fatalf("create_prd over HTTP: %s", text)
	}
	if _, err := os.Stat(filepath.Join(dir, "prd.json")); err != nil {
		t.Error(err)
	}
	// Attack: tools on another folder, by repo or by an absolute path.
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"run", map[string]any{"repo": other, "agent": "cmd", "agent_cmd": "id"}},
		{"stop", map[string]any{"repo": other}},
		{"approve", map[string]any{"repo": other, "id": "S-1"}},
		{"task_add", map[string]any{"repo": other, "title": "x"}},
		{"create_prd", map[string]any{"project": "h", "feature": "f", "path": filepath.Join(other, "prd.json")}},
		{"task_add", map[string]any{"title": "x", "file": "../" + filepath.Base(other) + "/tasks.jsonl"}},
		{"run", map[string]any{"prd": filepath.Join(other, "prd.json"), "agent": "cmd", "agent_cmd": "id"}},
	} {
		text, isErr := call(c.tool, c.args)
		if !isErr || !(strings.Contains(text, "serves "+dir+" only") || strings.Contains(text, "is outside the repository")) {
			t.Errorf("%s %v on another folder: error %v: %s", c.tool, c.args, isErr, text)
		}
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Errorf("the other folder was written: %v", entries)
	}

	// A second start prints where the token is, not the token.
	_, errb2 := startMCPHTTP(t, dir, MCPOptions{AllowRepos: []string{other}})
	if strings.Contains(errb2.String(), token) || !strings.Contains(errb2.String(), "token in "+tokenFile) {
		t.Fatalf("second start:\n%s", errb2)
	}
}

// --allow-repo lets the tools act on another repository.
func TestMCPOverHTTPAllowRepo(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	url, _ := startMCPHTTP(t, dir, MCPOptions{AllowRepos: []string{other}})
	b, _ := os.ReadFile(filepath.Join(dir, ".ralph", "mcp-token"))
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "http"}, nil).Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{strings.TrimSpace(string(b))}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "create_prd", Arguments: map[string]any{"repo": other, "project": "h", "feature": "f"}})
	if err != nil || res.IsError {
		t.Fatalf("create_prd in an allowed repository: %v %+v", err, res)
	}
	if _, err := os.Stat(filepath.Join(other, "prd.json")); err != nil {
		t.Error(err)
	}
}
