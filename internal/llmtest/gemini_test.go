package llmtest

import (
	"encoding/json"
	"testing"
)

type geminiResp struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				FunctionCall *struct {
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
}

const geminiTools = `"tools":[{"functionDeclarations":[{"name":"write_file","parameters":{"type":"OBJECT"}}]}]`

func TestGeminiStreamingRoundTrip(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	url := srv.URL() + "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
	body := `{"contents":[{"role":"user","parts":[{"text":"write a.txt"}]}],"systemInstruction":{"parts":[{"text":"sys"}]},` + geminiTools + `}`
	res := post(t, url, body)
	if res.status != 200 || res.header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("status %d %v", res.status, res.header)
	}
	evs := parseSSE(t, res.body)
	var text string
	var call json.RawMessage
	var last geminiResp
	for i, ev := range evs {
		var r geminiResp
		if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
			t.Fatal(err)
		}
		if r.Candidates[0].Content.Role != "model" {
			t.Errorf("role %q", r.Candidates[0].Content.Role)
		}
		if (r.Candidates[0].FinishReason != "") != (i == len(evs)-1) {
			t.Errorf("finishReason on chunk %d of %d", i, len(evs))
		}
		for _, p := range r.Candidates[0].Content.Parts {
			if p.Text != nil {
				text += *p.Text
			}
			if p.FunctionCall != nil {
				if p.FunctionCall.Name != "write_file" {
					t.Errorf("call %+v", p.FunctionCall)
				}
				call = p.FunctionCall.Args
			}
		}
		last = r
	}
	if text != "I will write the file now." || call == nil {
		t.Fatalf("text %q call %s", text, call)
	}
	var args map[string]string
	if err := json.Unmarshal(call, &args); err != nil || args["path"] != "a.txt" {
		t.Errorf("args %s", call)
	}
	if last.Candidates[0].FinishReason != "STOP" || last.UsageMetadata.CandidatesTokenCount <= 0 ||
		last.UsageMetadata.TotalTokenCount != last.UsageMetadata.PromptTokenCount+last.UsageMetadata.CandidatesTokenCount {
		t.Errorf("last chunk %+v", last)
	}

	// Follow-up with the function response advances to step 1.
	body = `{"contents":[{"role":"user","parts":[{"text":"write a.txt"}]},
	{"role":"model","parts":[{"text":"I will write the file now."},{"functionCall":{"name":"write_file","args":{}}}]},
	{"role":"user","parts":[{"functionResponse":{"name":"write_file","response":{"output":"ok"}}}]}],` + geminiTools + `}`
	evs = parseSSE(t, post(t, url, body).body)
	text = ""
	for _, ev := range evs {
		var r geminiResp
		_ = json.Unmarshal([]byte(ev.data), &r)
		for _, p := range r.Candidates[0].Content.Parts {
			if p.FunctionCall != nil {
				t.Errorf("unexpected call")
			}
			if p.Text != nil {
				text += *p.Text
			}
		}
	}
	if text != "All done: wrote a.txt." {
		t.Errorf("text %q", text)
	}
	if r := lastReq(t, srv); r.API != apiGemini || r.Model != "gemini-2.5-pro" || r.AssistantTurns != 1 || r.Step != 1 || !r.Stream {
		t.Errorf("log %+v", r)
	}
}

func TestGeminiNonStreamingAndCount(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	body := `{"contents":[{"role":"user","parts":[{"text":"go"}]}],` + geminiTools + `}`
	res := post(t, srv.URL()+"/v1beta/models/gemini-2.5-flash:generateContent", body)
	var r geminiResp
	if err := json.Unmarshal(res.body, &r); err != nil {
		t.Fatal(err)
	}
	parts := r.Candidates[0].Content.Parts
	if len(parts) != 2 || *parts[0].Text != "I will write the file now." || parts[1].FunctionCall == nil || r.Candidates[0].FinishReason != "STOP" {
		t.Errorf("response %s", res.body)
	}
	// Streaming without alt=sse is a JSON array.
	res = post(t, srv.URL()+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", body)
	var list []geminiResp
	if err := json.Unmarshal(res.body, &list); err != nil || len(list) < 2 {
		t.Errorf("array stream %s: %v", res.body, err)
	}
	res = post(t, srv.URL()+"/v1beta/models/gemini-2.5-flash:countTokens", body)
	if m := decode(t, res.body); res.status != 200 || m["totalTokens"].(float64) <= 0 {
		t.Errorf("countTokens %s", res.body)
	}
	res = post(t, srv.URL()+"/v1beta/models/gemini-2.5-flash:embedContent", body)
	if m := decode(t, res.body); res.status != 404 || m["error"].(map[string]any)["status"] != "NOT_FOUND" {
		t.Errorf("unknown method %d %s", res.status, res.body)
	}
	if res := get(t, srv.URL()+"/v1beta/models"); res.status != 200 || len(decode(t, res.body)["models"].([]any)) == 0 {
		t.Errorf("model list %s", res.body)
	}
}

func TestGeminiRateLimit(t *testing.T) {
	script := twoSteps()
	script.Steps[0].Status = 429
	script.Steps[0].RetryAfter = 2
	srv, _ := startServer(t, script)
	url := srv.URL() + "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
	body := `{"contents":[{"role":"user","parts":[{"text":"go"}]}],` + geminiTools + `}`
	res := post(t, url, body)
	e, _ := decode(t, res.body)["error"].(map[string]any)
	if res.status != 429 || res.header.Get("Retry-After") != "2" || e["status"] != "RESOURCE_EXHAUSTED" || e["code"] != 429.0 || e["message"] == "" {
		t.Fatalf("status %d body %s", res.status, res.body)
	}
	if res := post(t, url, body); res.status != 200 {
		t.Errorf("second status %d", res.status)
	}
}

// Gemini CLI's side requests ask for JSON with a schema (next speaker check).
func TestGeminiSideJSON(t *testing.T) {
	srv, _ := startServer(t, twoSteps())
	body := `{"contents":[{"role":"user","parts":[{"text":"who speaks next?"}]}],"generationConfig":{"responseMimeType":"application/json",
	"responseJsonSchema":{"type":"object","properties":{"reasoning":{"type":"string"},"next_speaker":{"type":"string","enum":["user","model"]}},"required":["reasoning","next_speaker"]}}}`
	res := post(t, srv.URL()+"/v1beta/models/gemini-2.5-flash:generateContent", body)
	var r geminiResp
	if err := json.Unmarshal(res.body, &r); err != nil {
		t.Fatal(err)
	}
	var ans map[string]string
	if err := json.Unmarshal([]byte(*r.Candidates[0].Content.Parts[0].Text), &ans); err != nil || ans["next_speaker"] != "user" || ans["reasoning"] == "" {
		t.Errorf("side JSON %s", res.body)
	}
	if !lastReq(t, srv).Side {
		t.Error("not logged as side request")
	}
}
