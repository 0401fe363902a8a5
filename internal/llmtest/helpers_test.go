package llmtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// twoSteps is a script with a tool call step and a final text step.
func twoSteps() *Script {
	return &Script{Steps: []Step{
		{Text: "I will write the file now.", ToolCalls: []ToolCall{{Name: "write_file", Input: json.RawMessage(`{"path":"a.txt","content":"héllo wörld — a somewhat longer line of content\n"}`)}}},
		{Text: "All done: wrote a.txt."},
	}}
}

func startServer(t *testing.T, s *Script) (*Server, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "llm.jsonl")
	srv, err := Start(s, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, logPath
}

type httpResult struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, url, body string) httpResult {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpResult{resp.StatusCode, resp.Header, data}
}

func get(t *testing.T, url string) httpResult {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return httpResult{resp.StatusCode, resp.Header, data}
}

func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v\n%s", err, data)
	}
	return m
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	name string
	data string
}

func parseSSE(t *testing.T, data []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	norm := strings.ReplaceAll(string(data), "\r\n", "\n")
	for _, block := range strings.Split(norm, "\n\n") {
		if strings.TrimSpace(block) == "" {
			continue
		}
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("unexpected SSE line %q", line)
			}
		}
		out = append(out, ev)
	}
	return out
}

func readLog(t *testing.T, path string) []LoggedRequest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []LoggedRequest
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r LoggedRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Text())
		}
		out = append(out, r)
	}
	return out
}

func lastReq(t *testing.T, srv *Server) LoggedRequest {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("no requests logged")
	}
	return reqs[len(reqs)-1]
}
