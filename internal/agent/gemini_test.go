package agent

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestGeminiParserWrite(t *testing.T) {
	res := parseRecorded(t, &geminiParser{}, "gemini-write.jsonl", 0, "")
	if res.FinalText != "done <promise>COMPLETE</promise>" {
		t.Errorf("FinalText = %q", res.FinalText)
	}
	if res.SessionID != "c81282b4-5356-4f57-84ce-77a52a679699" {
		t.Errorf("SessionID = %q", res.SessionID)
	}
	if res.Usage.InputTokens != 24480 || res.Usage.OutputTokens != 22 {
		t.Errorf("Usage = %+v", res.Usage)
	}
	if res.IsError || res.RateLimit != nil {
		t.Errorf("res = %+v", res)
	}
}

func TestGeminiParserFinalMessageOnly(t *testing.T) {
	p := &geminiParser{}
	for _, l := range []string{
		`{"type":"init","session_id":"s"}`,
		`{"type":"message","role":"assistant","content":"I will write ","delta":true}`,
		`{"type":"message","role":"assistant","content":"<promise>COMPLETE</promise> later","delta":true}`,
		`{"type":"tool_use","tool_name":"write_file","tool_id":"1","parameters":{}}`,
		`{"type":"tool_result","tool_id":"1","status":"success","output":"<promise>X</promise>"}`,
		`{"type":"message","role":"assistant","content":"all ","delta":true}`,
		`{"type":"message","role":"assistant","content":"done","delta":true}`,
		`{"type":"result","status":"success","stats":{"input_tokens":10,"output_tokens":2,"cached":4}}`,
	} {
		p.Line([]byte(l))
	}
	res := Result{}
	p.Finish(&res, "")
	if res.FinalText != "all done" || res.Turns != 2 || res.Usage.InputTokens != 6 || res.Usage.CacheReadTokens != 4 {
		t.Fatalf("res = %+v", res)
	}
}

func TestGeminiParser429(t *testing.T) {
	res := parseRecorded(t, &geminiParser{}, "gemini-429.jsonl", 173, "")
	if !res.IsError || res.RateLimit == nil || res.RateLimit.ResetAt.IsZero() {
		t.Fatalf("res = %+v rl=%+v", res, res.RateLimit)
	}
}

func TestGeminiParser500(t *testing.T) {
	res := parseRecorded(t, &geminiParser{}, "gemini-500.jsonl", 244, "")
	if !res.IsError || res.RateLimit != nil || !strings.Contains(res.ErrorText, "500") {
		t.Fatalf("res = %+v", res)
	}
}

func TestGeminiPlan(t *testing.T) {
	dir := t.TempDir()
	g := &gemini{cliBase: newCLIBase(geminiCLI, Options{BaseURL: "http://h:1", Command: []string{"gemini"}})}
	inv, err := g.Plan(Request{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inv.Argv, " "); got != "gemini -p  --output-format stream-json --yolo --skip-trust -m gemini-2.5-flash" {
		t.Errorf("argv = %q", got)
	}
	env := strings.Join(inv.Env, " ")
	for _, w := range []string{"GOOGLE_GEMINI_BASE_URL=http://h:1", "GEMINI_API_KEY=", "GEMINI_CLI_HOME=" + geminiHome(dir)} {
		if !strings.Contains(env, w) {
			t.Errorf("env %q lacks %q", env, w)
		}
	}
	if s := inv.Files[filepath.Join(geminiHome(dir), ".gemini", "settings.json")]; !strings.Contains(s, `"gemini-api-key"`) {
		t.Errorf("settings = %q", s)
	}
}
