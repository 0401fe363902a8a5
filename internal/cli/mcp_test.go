package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ralph-loop/ralph/internal/iostreams"
	"github.com/ralph-loop/ralph/internal/testenv"
)

// ralph mcp --http: the same server over streamable HTTP.
func TestMCPOverHTTP(t *testing.T) {
	dir := t.TempDir() // prd new needs no repository
	streams, _, _, _ := iostreams.Test()
	errb := &testenv.LockedBuffer{}
	streams.ErrOut = errb
	f := &Factory{IO: streams, Getwd: func() (string, error) { return dir, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runMCP(ctx, &MCPOptions{IO: f, HTTP: "127.0.0.1:0"}) }()
	var url string
	for i := 0; i < 200 && url == ""; i++ {
		if _, rest, ok := strings.Cut(errb.String(), "at http://"); ok {
			url = "http://" + strings.TrimSpace(rest)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if url == "" {
		t.Fatalf("no address printed: %q", errb.String())
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "http"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "create_prd", Arguments: map[string]any{"project": "h", "feature": "over http"}})
	if err != nil || res.IsError {
		t.Fatalf("create_prd over HTTP: %v %+v", err, res)
	}
	if _, err := os.Stat(filepath.Join(dir, "prd.json")); err != nil {
		t.Error(err)
	}
	cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("runMCP: %v", err)
	}
}
