package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// API names used in LoggedRequest.API.
const (
	APIAnthropic   = "anthropic"
	apiCountTokens = "count_tokens"
	apiResponses   = "responses"
	APIChat        = "chat"
	apiGemini      = "gemini"
	apiModels      = "models"
	apiHealth      = "health"
	apiUnknown     = "unknown"
)

// LoggedRequest is what the server records about one request.
type LoggedRequest struct {
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	Path   string    `json:"path"` // including the query string
	API    string    `json:"api"`
	Model  string    `json:"model,omitempty"`
	Stream bool      `json:"stream"`
	// Tools is the number of tools the request declared.
	Tools int `json:"tools"`
	// Side is true for requests without tools, answered with Script.SideAnswer.
	Side           bool `json:"side,omitempty"`
	AssistantTurns int  `json:"assistant_turns"`
	// Step is the script step served (or faulted); -1 for side requests and
	// requests that are not model turns; len(Steps) or more past the end.
	Step int `json:"step"`
	// Branch is the conversation that answered: 0 for Script.Steps, i+1
	// for Script.Branches[i].
	Branch int `json:"branch,omitempty"`
	// Fault is true when the answer was an injected error.
	Fault     bool   `json:"fault,omitempty"`
	Status    int    `json:"status"`
	Error     string `json:"error,omitempty"`
	UserAgent string `json:"user_agent,omitempty"`
	// Body is the request body: JSON as is, anything else as a JSON string.
	Body json.RawMessage `json:"body,omitempty"`
}

// Server is a running scripted LLM server.
type Server struct {
	script *Script
	ln     net.Listener
	srv    *http.Server
	url    string
	done   chan struct{}

	mu        sync.Mutex
	faultHits map[int]int
	reqs      []LoggedRequest
	logf      *os.File
	closed    bool
}

// Start serves script on 127.0.0.1 at a free port. When logPath is not empty
// every request is appended to it as one JSON line.
func Start(script *Script, logPath string) (*Server, error) {
	return StartAddr("127.0.0.1:0", script, logPath)
}

// StartAddr is Start on a given listen address.
func StartAddr(addr string, script *Script, logPath string) (*Server, error) {
	if script == nil {
		script = &Script{}
	}
	if err := script.normalize(); err != nil {
		return nil, err
	}
	s := &Server{script: script, faultHits: map[int]int{}, done: make(chan struct{})}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		s.logf = f
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if s.logf != nil {
			s.logf.Close()
		}
		return nil, err
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the base URL, http://127.0.0.1:PORT (no trailing slash, no /v1).
func (s *Server) URL() string { return s.url }

// Close stops the server and closes the log file.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.srv.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logf != nil {
		if cerr := s.logf.Close(); err == nil {
			err = cerr
		}
		s.logf = nil
	}
	return err
}

// Requests returns a copy of everything logged so far.
func (s *Server) Requests() []LoggedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]LoggedRequest(nil), s.reqs...)
}

func (s *Server) record(rec *LoggedRequest) {
	line, err := json.Marshal(rec)
	if err != nil { // cannot happen with a valid Body; be safe anyway
		rec.Body = nil
		line, _ = json.Marshal(rec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, *rec)
	if s.logf != nil {
		_, _ = s.logf.Write(append(line, '\n'))
	}
}

// statusWriter remembers the status code and keeps http.Flusher.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// call is one request being served.
type call struct {
	s    *Server
	w    *statusWriter
	r    *http.Request
	body []byte
	rec  *LoggedRequest
	once sync.Once
}

// logged records the request in the log, once. A streamed answer calls it
// (through sse.ending) before its terminal events: streaming clients stop
// reading there, before the handler returns, and a test that reads the log
// as soon as its client is done must find the request in it. Everything
// the log says about the answer is decided by then.
func (c *call) logged() {
	c.once.Do(func() {
		c.rec.Status = c.w.status
		if c.rec.Status == 0 {
			c.rec.Status = http.StatusOK
		}
		c.s.record(c.rec)
	})
}

// startSSE begins a streamed answer whose ending logs the request.
func (c *call) startSSE() *sse {
	e := startSSE(c.w)
	e.ending = c.logged
	return e
}

const maxBody = 256 << 20

func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	rec := &LoggedRequest{
		Time:      time.Now().UTC(),
		Method:    r.Method,
		Path:      r.URL.RequestURI(),
		API:       apiUnknown,
		Step:      -1,
		UserAgent: r.UserAgent(),
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if len(body) > 0 {
		if json.Valid(body) {
			var buf bytes.Buffer
			if json.Compact(&buf, body) == nil {
				rec.Body = buf.Bytes()
			}
		} else {
			rec.Body, _ = json.Marshal(string(body))
		}
	}
	c := &call{s: s, w: w, r: r, body: body, rec: rec}
	defer func() {
		if p := recover(); p != nil {
			rec.Error = fmt.Sprint("panic: ", p)
			if w.status == 0 {
				genericError(w, http.StatusInternalServerError, "llmtest: internal error: "+fmt.Sprint(p))
			}
		}
		c.logged() // a non-streamed answer ends after the handler returns
	}()
	if err != nil {
		rec.Error = "read body: " + err.Error()
		genericError(w, http.StatusBadRequest, "llmtest: cannot read request body: "+err.Error())
		return
	}
	s.route(c)
}

func (s *Server) route(c *call) {
	p := strings.TrimSuffix(c.r.URL.Path, "/")
	method := c.r.Method

	// Gemini: /{v1,v1beta,v1alpha}/models/{model}:{action}
	if ver, rest, ok := cutVersion(p); ok && strings.HasPrefix(rest, "/models") {
		if i := strings.LastIndex(rest, ":"); i > 0 && strings.HasPrefix(rest, "/models/") {
			model, action := rest[len("/models/"):i], rest[i+1:]
			if method != http.MethodPost {
				c.rec.API = apiGemini
				geminiError(c.w, http.StatusMethodNotAllowed, "method "+method+" not allowed", 0)
				return
			}
			s.handleGemini(c, model, action)
			return
		}
		if ver != "v1" && method == http.MethodGet {
			c.rec.API = apiModels
			geminiModels(c, strings.TrimPrefix(strings.TrimPrefix(rest, "/models"), "/"))
			return
		}
	}

	// OpenAI and Anthropic paths, with or without the /v1 prefix.
	op := strings.TrimPrefix(p, "/v1")
	if op == p || op == "" || op[0] != '/' {
		op = p
	}
	switch {
	case op == "/messages":
		c.rec.API = APIAnthropic
		if !allow(c, http.MethodPost, anthropicError) {
			return
		}
		s.handleAnthropic(c)
	case op == "/messages/count_tokens":
		c.rec.API = apiCountTokens
		if !allow(c, http.MethodPost, anthropicError) {
			return
		}
		s.handleAnthropicCount(c)
	case op == "/responses":
		c.rec.API = apiResponses
		if !allow(c, http.MethodPost, openaiError) {
			return
		}
		s.handleResponses(c)
	case op == "/chat/completions":
		c.rec.API = APIChat
		if !allow(c, http.MethodPost, openaiError) {
			return
		}
		s.handleChat(c)
	case op == "/models" || strings.HasPrefix(op, "/models/"):
		c.rec.API = apiModels
		if !allow(c, http.MethodGet, openaiError) {
			return
		}
		listModels(c, strings.TrimPrefix(strings.TrimPrefix(op, "/models"), "/"))
	case p == "" || p == "/healthz" || p == "/health":
		c.rec.API = apiHealth
		writeJSON(c.w, http.StatusOK, map[string]any{"ok": true, "steps": len(s.script.Steps)})
	default:
		if strings.HasPrefix(p, "/v1beta") || strings.HasPrefix(p, "/v1alpha") {
			geminiError(c.w, http.StatusNotFound, "llmtest: unknown path "+c.r.URL.Path, 0)
			return
		}
		genericError(c.w, http.StatusNotFound, "llmtest: unknown path "+c.r.URL.Path)
	}
}

func cutVersion(p string) (ver, rest string, ok bool) {
	for _, v := range []string{"v1beta", "v1alpha", "v1"} {
		if r, found := strings.CutPrefix(p, "/"+v); found && (r == "" || r[0] == '/') {
			return v, r, true
		}
	}
	return "", "", false
}

type errorWriter func(w http.ResponseWriter, status int, msg string, retryAfter int)

func allow(c *call, method string, ew errorWriter) bool {
	if c.r.Method == method {
		return true
	}
	c.w.Header().Set("Allow", method)
	ew(c.w, http.StatusMethodNotAllowed, "llmtest: method "+c.r.Method+" not allowed on "+c.r.URL.Path, 0)
	return false
}

// turn is the decision for one request.
type turn struct {
	step  int
	text  string
	calls []ToolCall
	fault *Step
	// wantJSON is set by handlers for side requests asking for JSON output.
}

// decide picks the reply for a request with the given number of assistant
// turns and records the choice in rec. sideText is used for side requests.
func (s *Server) decide(rec *LoggedRequest, turns int, hasTools bool, sideText string) turn {
	rec.AssistantTurns = turns
	if !hasTools {
		rec.Side = true
		rec.Step = -1
		return turn{step: -1, text: sideText}
	}
	rec.Step = turns
	steps, branch := s.script.stepsFor(rec.Body)
	rec.Branch = branch
	if turns >= len(steps) {
		if len(steps) == 0 {
			return turn{step: turns, text: s.script.sideAnswer()}
		}
		return turn{step: turns, text: steps[len(steps)-1].Text}
	}
	st := &steps[turns]
	if st.Status != 0 {
		times := max(st.Times, 1)
		s.mu.Lock()
		key := branch<<20 | turns
		hit := s.faultHits[key] < times
		if hit {
			s.faultHits[key]++
		}
		s.mu.Unlock()
		if hit {
			rec.Fault = true
			return turn{step: turns, fault: st}
		}
	}
	return turn{step: turns, text: st.Text, calls: st.ToolCalls}
}

// faultMessage is the error message of an injected fault.
func faultMessage(st *Step) string {
	if st.ErrorMessage != "" {
		return st.ErrorMessage
	}
	switch st.Status {
	case http.StatusTooManyRequests:
		if st.RetryAfter > 0 {
			return fmt.Sprintf("Rate limit reached (llmtest). Please try again in %ds.", st.RetryAfter)
		}
		return "Rate limit reached (llmtest)."
	case 529:
		return "Overloaded (llmtest)"
	default:
		if t := http.StatusText(st.Status); t != "" {
			return t + " (llmtest)"
		}
		return fmt.Sprintf("error %d (llmtest)", st.Status)
	}
}

func setRetryAfter(w http.ResponseWriter, status, retryAfter int) {
	if status == http.StatusTooManyRequests || retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
	}
}

// countTurns counts contiguous runs of true values: one per assistant turn.
func countTurns(isAssistant []bool) int {
	n := 0
	prev := false
	for _, a := range isAssistant {
		if a && !prev {
			n++
		}
		prev = a
	}
	return n
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"message":"llmtest: cannot encode response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// genericError is a body both Anthropic and OpenAI clients understand.
func genericError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status >= 500:
		typ = "api_error"
	}
	writeJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": typ, "message": msg, "code": typ, "param": nil},
	})
}

// sse writes server-sent events. ending, when set, runs once before the
// stream's terminal events (see call.logged).
type sse struct {
	w      http.ResponseWriter
	seq    int
	ending func()
}

// end marks the start of the terminal events.
func (e *sse) end() {
	if e.ending != nil {
		e.ending()
		e.ending = nil
	}
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w}
}

func (e *sse) write(s string) {
	_, _ = io.WriteString(e.w, s)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// event writes "event: name" and "data: json".
func (e *sse) event(name string, v any) {
	data, _ := json.Marshal(v)
	e.write("event: " + name + "\ndata: " + string(data) + "\n\n")
}

// data writes a "data: json" event.
func (e *sse) data(v any, sep string) {
	data, _ := json.Marshal(v)
	e.write("data: " + string(data) + sep)
}

// chunks splits s into pieces of at most n runes, on rune boundaries,
// preferring to cut after a space. An empty s gives no chunks.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		if utf8.RuneCountInString(s) <= n {
			out = append(out, s)
			break
		}
		end, count := 0, 0
		cut := -1
		for i, r := range s {
			if count == n {
				end = i
				break
			}
			count++
			if r == ' ' || r == '\n' {
				cut = i + utf8.RuneLen(r)
			}
		}
		if cut > 0 && cut >= end/2 {
			end = cut
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

const textChunk = 24
const argsChunk = 32

// tokens estimates a token count for n bytes of text.
func tokens(n int) int { return max(1, (n+3)/4) }

func outputTokens(t turn) int {
	n := len(t.text)
	for _, c := range t.calls {
		n += len(c.Name) + len(c.Input)
	}
	return tokens(n)
}

const idChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randID(prefix string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = idChars[rand.IntN(len(idChars))]
	}
	return prefix + string(b)
}

func hexID(prefix string, n int) string {
	const hex = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = hex[rand.IntN(16)]
	}
	return prefix + string(b)
}

func badJSON(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("llmtest: malformed JSON body at offset %d: %v", se.Offset, err)
	}
	return "llmtest: invalid request body: " + err.Error()
}

// inputObject returns a tool call's input as a JSON object (wrapping
// non-objects as {"value": ...}).
func inputObject(in json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(in)
	if len(t) == 0 {
		return json.RawMessage(`{}`)
	}
	if t[0] == '{' {
		return t
	}
	return json.RawMessage(`{"value":` + string(t) + `}`)
}
