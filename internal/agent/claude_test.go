package agent

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// parseRecorded feeds a recorded stdout through p line by line, like RunCLI.
func parseRecorded(t *testing.T, p StreamParser, name string, exit int, stderr string) Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		p.Line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	res := Result{ExitCode: exit}
	p.Finish(&res, stderr)
	return res
}

func TestClaudeParserWrite(t *testing.T) {
	res := parseRecorded(t, &claudeParser{}, "claude-write.jsonl", 0, "")
	if res.FinalText != "done <promise>COMPLETE</promise>" {
		t.Errorf("FinalText = %q", res.FinalText)
	}
	if res.SessionID != "7044ec20-52bf-4f1d-9b7c-b253949ae091" {
		t.Errorf("SessionID = %q", res.SessionID)
	}
	if res.Usage.InputTokens != 25123 || res.Usage.OutputTokens != 26 || res.Usage.CostUSD <= 0 {
		t.Errorf("Usage = %+v", res.Usage)
	}
	if res.Turns != 2 || res.IsError || res.RateLimit != nil || res.PermissionDenials != 0 {
		t.Errorf("res = %+v", res)
	}
}

func TestClaudeParser429(t *testing.T) {
	res := parseRecorded(t, &claudeParser{}, "claude-429.jsonl", 1, "")
	if !res.IsError || res.RateLimit == nil {
		t.Fatalf("want error + rate limit, got %+v", res)
	}
	if !strings.Contains(res.RateLimit.Message, "429") {
		t.Errorf("RateLimit = %+v", res.RateLimit)
	}
}

func TestClaudeParser500(t *testing.T) {
	res := parseRecorded(t, &claudeParser{}, "claude-500.jsonl", 1, "")
	if !res.IsError || res.RateLimit != nil || !strings.Contains(res.ErrorText, "500") {
		t.Fatalf("want error without rate limit, got %+v", res)
	}
}

func TestClaudeParserUsageLimitEvents(t *testing.T) {
	// Shapes of Claude Code's subscription-limit output (not recorded here:
	// the scripted server cannot produce them).
	reset := time.Now().Add(2 * time.Hour).Unix()
	p := &claudeParser{}
	p.Line([]byte(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":` + itoa(reset) + `,"rateLimitType":"five_hour"},"session_id":"s1"}`))
	p.Line([]byte(`{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached|` + itoa(reset) + `","session_id":"s1","num_turns":1}`))
	res := Result{ExitCode: 1}
	p.Finish(&res, "")
	if res.RateLimit == nil || res.RateLimit.ResetAt.Unix() != reset {
		t.Fatalf("RateLimit = %+v", res.RateLimit)
	}

	p = &claudeParser{}
	p.Line([]byte(`{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached|` + itoa(reset) + `","session_id":"s1"}`))
	res = Result{ExitCode: 1}
	p.Finish(&res, "")
	if res.RateLimit == nil || res.RateLimit.ResetAt.Unix() != reset {
		t.Fatalf("RateLimit from text = %+v", res.RateLimit)
	}
}

func TestClaudeParserNoResult(t *testing.T) {
	p := &claudeParser{}
	p.Line([]byte(`not json`))
	p.Line([]byte(`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"first"}],"usage":{"input_tokens":5,"output_tokens":2}},"session_id":"s"}`))
	p.Line([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","content":"<promise>COMPLETE</promise>"}]}}`))
	p.Line([]byte(`{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"second"}],"usage":{"input_tokens":7,"output_tokens":3}},"session_id":"s"}`))
	res := Result{ExitCode: 137}
	p.Finish(&res, "killed\n")
	if res.FinalText != "second" || res.Usage.InputTokens != 12 || res.Turns != 2 || !res.IsError {
		t.Fatalf("res = %+v", res)
	}
}

func TestRateLimitFrom(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		msg  string
		want time.Duration // -1: not a rate limit; 0: rate limit without reset
	}{
		{"Rate limit reached for gpt-5. Please try again in 20s.", 20 * time.Second},
		{"You've hit your usage limit. Try again in 4 days 3 hours 2 minutes.", 4*24*time.Hour + 3*time.Hour + 2*time.Minute},
		{"Resource has been exhausted (e.g. check quota).\nSuggested retry after 1s.", time.Second},
		{"exceeded retry limit, last status: 429 Too Many Requests", 0},
		{"rate limited: please try again in 1.5s", 1500 * time.Millisecond},
		{"Internal server error", -1},
		{"HTTP 429: slow down", 0},
		{"status 429.", 0},
		{"API Error: 500 boom. Check your inference gateway (127.0.0.1:42953).", -1},
		{"request id req_9a429b failed with 500", -1},
		{"error 4290", -1},
		{"", -1},
	}
	for _, c := range cases {
		rl := rateLimitFrom(c.msg, now, false)
		switch {
		case c.want < 0:
			if rl != nil {
				t.Errorf("%q: want nil, got %+v", c.msg, rl)
			}
		case rl == nil:
			t.Errorf("%q: want rate limit", c.msg)
		case c.want == 0 && !rl.ResetAt.IsZero():
			t.Errorf("%q: want no reset, got %v", c.msg, rl.ResetAt)
		case c.want > 0 && !rl.ResetAt.Equal(now.Add(c.want)):
			t.Errorf("%q: reset %v, want %v", c.msg, rl.ResetAt.Sub(now), c.want)
		}
	}
}

func TestClaudePlan(t *testing.T) {
	c := &claude{cliBase: newCLIBase(claudeCLI, Options{Model: "m1", BaseURL: "http://x/", Command: []string{"/bin/claude"}})}
	inv, err := c.Plan(Request{Dir: t.TempDir(), Args: []string{"--foo"}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(inv.Argv, " ")
	if got != "/bin/claude -p --output-format stream-json --verbose --dangerously-skip-permissions --model m1 --foo" {
		t.Errorf("argv = %s", got)
	}
	env := strings.Join(inv.Env, " ")
	for _, w := range []string{"ANTHROPIC_BASE_URL=http://x ", "ANTHROPIC_API_KEY=", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1"} {
		if !strings.Contains(env+" ", w) {
			t.Errorf("env %q lacks %q", env, w)
		}
	}
	if !inv.PromptStdin {
		t.Error("prompt not on stdin")
	}
	// No base URL: nothing that changes the user's setup.
	c = &claude{cliBase: newCLIBase(claudeCLI, Options{})}
	c.BaseURL = ""
	inv, _ = c.Plan(Request{})
	for _, kv := range inv.Env {
		if !strings.HasPrefix(kv, "IS_SANDBOX=") {
			t.Errorf("unexpected env without base URL: %s", kv)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
