package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestOpencodeParserWrite(t *testing.T) {
	res := parseRecorded(t, &opencodeParser{}, "opencode-write.jsonl", 0, "")
	if res.FinalText != "done <promise>COMPLETE</promise>" {
		t.Errorf("FinalText = %q", res.FinalText)
	}
	if res.SessionID != "ses_dff2bc137fferfem1ps3G1CfMo" {
		t.Errorf("SessionID = %q", res.SessionID)
	}
	if res.Usage.InputTokens != 7679+7759 || res.Usage.OutputTokens != 17+8 {
		t.Errorf("Usage = %+v", res.Usage)
	}
	if res.Turns != 2 || res.IsError || res.RateLimit != nil {
		t.Errorf("res = %+v", res)
	}
}

func TestOpencodeParser429(t *testing.T) {
	before := time.Now()
	res := parseRecorded(t, &opencodeParser{}, "opencode-429.jsonl", 1, "")
	if !res.IsError || res.RateLimit == nil {
		t.Fatalf("res = %+v", res)
	}
	// "Please try again in 20s."
	if d := res.RateLimit.ResetAt.Sub(before); d < 19*time.Second || d > 30*time.Second {
		t.Errorf("ResetAt in %v", d)
	}
}

func TestOpencodeParser500(t *testing.T) {
	res := parseRecorded(t, &opencodeParser{}, "opencode-500.jsonl", 1, "")
	if !res.IsError || res.RateLimit != nil || !strings.Contains(res.ErrorText, "500") {
		t.Fatalf("res = %+v", res)
	}
}

func TestOpencodePlan(t *testing.T) {
	c := &opencode{cliBase: newCLIBase(opencodeCLI, Options{BaseURL: "http://h:1", Model: "m", Command: []string{"opencode"}})}
	inv, err := c.Plan(Request{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inv.Argv, " "); got != "opencode run --format json --auto -m ralph/m" {
		t.Errorf("argv = %s", got)
	}
	var cfg map[string]any
	for _, kv := range inv.Env {
		if v, ok := strings.CutPrefix(kv, "OPENCODE_CONFIG_CONTENT="); ok {
			if err := json.Unmarshal([]byte(v), &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := cfg["provider"].(map[string]any)["ralph"].(map[string]any)
	if p["npm"] != "@ai-sdk/openai-compatible" || p["options"].(map[string]any)["baseURL"] != "http://h:1/v1" {
		t.Errorf("provider = %v", p)
	}
	c = &opencode{cliBase: newCLIBase(opencodeCLI, Options{})}
	c.BaseURL = ""
	if inv, _ := c.Plan(Request{}); len(inv.Env) != 0 {
		t.Errorf("env without base URL: %v", inv.Env)
	}
}
