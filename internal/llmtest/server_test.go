package llmtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestSideAnswerDoesNotConsumeSteps(t *testing.T) {
	script := twoSteps()
	script.SideAnswer = "Fix the bug"
	srv, _ := startServer(t, script)
	cases := []struct{ path, body, want string }{
		{"/v1/messages", `{"model":"claude-haiku","max_tokens":1,"messages":[{"role":"user","content":"quota"}]}`, `"text":"Fix the bug"`},
		{"/v1/messages", `{"model":"claude-haiku","stream":true,"tools":[],"messages":[{"role":"user","content":"title?"},{"role":"assistant","content":"a"},{"role":"user","content":"b"}]}`, `"text":"Fix the bug"`},
		{"/v1/responses", `{"model":"gpt-5","input":"summarize"}`, `"text":"Fix the bug"`},
		{"/v1/chat/completions", `{"model":"gpt-5","messages":[{"role":"user","content":"title"}]}`, `"content":"Fix the bug"`},
		{"/v1/chat/completions", `{"model":"gpt-5","stream":true,"messages":[{"role":"user","content":"title"}]}`, `"content":"Fix the bug"`},
		{"/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"googleSearch":{}}]}`, `"text":"Fix the bug"`},
	}
	for _, c := range cases {
		res := post(t, srv.URL()+c.path, c.body)
		if res.status != 200 || !strings.Contains(string(res.body), c.want) || strings.Contains(string(res.body), "write_file") {
			t.Errorf("%s %s: %d %s", c.path, c.body, res.status, res.body)
		}
		if r := lastReq(t, srv); !r.Side || r.Step != -1 {
			t.Errorf("log %+v", r)
		}
	}
	// Default side answer and default JSON side answer.
	srv2, _ := startServer(t, twoSteps())
	res := post(t, srv2.URL()+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(string(res.body), `"content":"ok"`) {
		t.Errorf("default side answer %s", res.body)
	}
	res = post(t, srv2.URL()+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`)
	if !strings.Contains(string(res.body), `"content":"{}"`) {
		t.Errorf("JSON side answer without schema %s", res.body)
	}
	res = post(t, srv2.URL()+"/v1/responses", `{"model":"m","input":"x","text":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"title":{"type":"string"},"n":{"type":"integer"}}}}}}`)
	if !strings.Contains(string(res.body), `"text":"{\"n\":0,\"title\":\"ok\"}"`) && !strings.Contains(string(res.body), `\"title\":\"ok\"`) {
		t.Errorf("JSON side answer %s", res.body)
	}
}

func TestMalformedAndUnknown(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	for _, p := range []string{"/v1/messages", "/v1/messages/count_tokens", "/v1/responses", "/v1/chat/completions",
		"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "/v1beta/models/gemini-2.5-pro:countTokens"} {
		for _, body := range []string{`{"model":`, `not json`, ``, `[]`, `{"messages":"nope","contents":3,"input":[1],"tools":{}}`} {
			res := post(t, srv.URL()+p, body)
			if res.status != 400 {
				t.Errorf("%s %q: status %d", p, body, res.status)
				continue
			}
			m := decode(t, res.body)
			e, _ := m["error"].(map[string]any)
			if msg, _ := e["message"].(string); msg == "" {
				t.Errorf("%s %q: no error message: %s", p, body, res.body)
			}
		}
	}
	for _, p := range []string{"/v1/nope", "/api/event_logging/batch", "/v1beta/tunedModels", "/v1/messages/batches"} {
		res := post(t, srv.URL()+p, `{}`)
		if res.status != 404 || !json.Valid(res.body) {
			t.Errorf("%s: %d %s", p, res.status, res.body)
		}
	}
	if res := get(t, srv.URL()+"/v1/messages"); res.status != 405 || !json.Valid(res.body) {
		t.Errorf("GET messages: %d %s", res.status, res.body)
	}
	if res := get(t, srv.URL()+"/healthz"); res.status != 200 {
		t.Errorf("healthz %d", res.status)
	}
}

func TestLogFile(t *testing.T) {
	srv, logPath := startServer(t, twoSteps())
	post(t, srv.URL()+"/v1/messages", `{"model":"claude-x","stream":true,"tools":[{"name":"t"}],"messages":[{"role":"user","content":"hi"}]}`)
	post(t, srv.URL()+"/v1/chat/completions", `not json at all`)
	get(t, srv.URL()+"/v1/models")
	srv.Close()
	log := readLog(t, logPath)
	if len(log) != 3 {
		t.Fatalf("%d log lines", len(log))
	}
	first := log[0]
	if first.Method != "POST" || first.Path != "/v1/messages" || first.API != APIAnthropic || first.Model != "claude-x" ||
		!first.Stream || first.Step != 0 || first.Status != 200 || first.Tools != 1 || first.Time.IsZero() {
		t.Errorf("first %+v", first)
	}
	var body map[string]any
	if err := json.Unmarshal(first.Body, &body); err != nil || body["model"] != "claude-x" {
		t.Errorf("body %s", first.Body)
	}
	var s string
	if err := json.Unmarshal(log[1].Body, &s); err != nil || s != "not json at all" || log[1].Status != 400 {
		t.Errorf("malformed body logged as %s (status %d)", log[1].Body, log[1].Status)
	}
	if log[2].API != apiModels || log[2].Status != 200 {
		t.Errorf("models %+v", log[2])
	}
	if got := srv.Requests(); len(got) != 3 {
		t.Errorf("Requests() has %d", len(got))
	}
}

func TestConcurrentFaults(t *testing.T) {
	script := twoSteps()
	script.Steps[0].Status = 503
	script.Steps[0].Times = 5
	srv, _ := startServer(t, script)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 20 {
		wg.Go(func() {
			res := post(t, srv.URL()+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"t"}}]}`)
			mu.Lock()
			codes[res.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[503] != 5 || codes[200] != 15 {
		t.Errorf("codes %v", codes)
	}
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "s.json")
	os.WriteFile(js, []byte(`{"steps":[{"text":"a","tool_calls":[{"name":"Bash","input":{ "command" : "ls" }}]},{"status":429,"times":2,"retry_after":1},{"tool_calls":[{"name":"x"}]}],"side_answer":"t"}`), 0o644)
	s, err := LoadScript(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) != 3 || string(s.Steps[0].ToolCalls[0].Input) != `{"command":"ls"}` || s.Steps[1].Times != 2 ||
		string(s.Steps[2].ToolCalls[0].Input) != `{}` || s.SideAnswer != "t" {
		t.Errorf("script %+v", s)
	}
	ym := filepath.Join(dir, "s.yaml")
	os.WriteFile(ym, []byte("steps:\n  - text: hi\n    tool_calls:\n      - name: Write\n        input: {file_path: a.txt, content: \"x\\n\"}\n  - text: done\n"), 0o644)
	s, err = LoadScript(ym)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) != 2 || string(s.Steps[0].ToolCalls[0].Input) != `{"file_path":"a.txt","content":"x\n"}` {
		t.Errorf("yaml script %+v %s", s, s.Steps[0].ToolCalls[0].Input)
	}
	for _, bad := range []string{`{"steps":[{"tool_calls":[{"input":{}}]}]}`, `{"steps":[{"status":200}]}`, `{"stepz":[]}`, `{`} {
		if _, err := parseScript([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestEmptyScript(t *testing.T) {
	srv, _ := startServer(t, nil)
	res := post(t, srv.URL()+"/v1/messages", `{"model":"m","tools":[{"name":"t"}],"messages":[{"role":"user","content":"x"}]}`)
	if res.status != 200 || decode(t, res.body)["stop_reason"] != "end_turn" {
		t.Errorf("%d %s", res.status, res.body)
	}
}

func TestChunks(t *testing.T) {
	for _, s := range []string{"", "a", "héllo wörld — ünïcödé ✓ text that is long enough to be split into pieces", strings.Repeat("日本語", 40), `{"a":"b c d e f g h i j k l m n o p q r s t u v w x y z"}`} {
		got := chunks(s, 10)
		if strings.Join(got, "") != s {
			t.Errorf("chunks(%q) lose text: %q", s, got)
		}
		for _, c := range got {
			if c == "" || !utf8.ValidString(c) || utf8.RuneCountInString(c) > 10 {
				t.Errorf("bad chunk %q", c)
			}
		}
	}
}

// orderWriter is a ResponseWriter that notes, for every write, whether the
// request was in the server's log by then.
type orderWriter struct {
	srv    *Server
	header http.Header
	writes []orderedWrite
}

type orderedWrite struct {
	data   string
	logged bool
}

func (w *orderWriter) Header() http.Header { return w.header }
func (w *orderWriter) WriteHeader(int)     {}
func (w *orderWriter) Flush()              {}
func (w *orderWriter) Write(b []byte) (int, error) {
	w.writes = append(w.writes, orderedWrite{string(b), len(w.srv.Requests()) > 0})
	return len(b), nil
}

// A streaming client stops reading at the stream's terminal event, before
// the handler returns; a test that reads the log right after must find its
// request there. So every write from the terminal event on comes after the
// request is logged. Called in process, the order is exact: no timing.
func TestStreamLoggedBeforeItsEnd(t *testing.T) {
	for _, tc := range []struct{ path, body, terminal string }{
		{"/v1/messages", `{"model":"m","stream":true,"tools":[{"name":"t"}],"messages":[{"role":"user","content":"hi"}]}`, "message_delta"},
		{"/v1/chat/completions", `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"t"}}],"messages":[{"role":"user","content":"hi"}]}`, `"finish_reason":"tool_calls"`},
		{"/v1/responses", `{"model":"m","stream":true,"tools":[{"type":"function","name":"t"}],"input":"hi"}`, "response.completed"},
		{"/v1beta/models/m:streamGenerateContent?alt=sse", `{"tools":[{"functionDeclarations":[{"name":"t"}]}],"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, `"finishReason"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			srv, _ := startServer(t, twoSteps())
			w := &orderWriter{srv: srv, header: http.Header{}}
			srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body)))
			seen := false
			for i, wr := range w.writes {
				seen = seen || strings.Contains(wr.data, tc.terminal)
				if seen && !wr.logged {
					t.Fatalf("write %d of %d (at or after %s) went out before the request was logged: %q", i+1, len(w.writes), tc.terminal, wr.data)
				}
			}
			if !seen {
				t.Fatalf("no %s in the stream: %+v", tc.terminal, w.writes)
			}
			if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Status != http.StatusOK || !reqs[0].Stream || reqs[0].Step != 0 {
				t.Fatalf("logged %+v", reqs)
			}
		})
	}
}

// TestBranches: a request whose body contains a branch's When plays that
// branch's steps, counted from its own start; others play Steps.
func TestBranches(t *testing.T) {
	s, err := parseScript([]byte(`{"steps": [{"text": "worker"}], "branches": [{"when": "# Role: Reviewer", "steps": [{"text": "REVIEW: approve"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if steps, b := s.stepsFor([]byte(`{"messages":[{"role":"user","content":"build it\n---\n# Role: Reviewer"}]}`)); b != 1 || steps[0].Text != "REVIEW: approve" {
		t.Fatalf("branch %d %+v", b, steps)
	}
	if steps, b := s.stepsFor([]byte(`{"messages":[{"role":"user","content":"build it"}]}`)); b != 0 || steps[0].Text != "worker" {
		t.Fatalf("branch %d %+v", b, steps)
	}
	if _, err := parseScript([]byte(`{"steps": [], "branches": [{"steps": []}]}`)); err == nil || !strings.Contains(err.Error(), "branch 0: empty when") {
		t.Fatalf("err %v", err)
	}
}
