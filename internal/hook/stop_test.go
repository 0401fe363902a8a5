package hook

import (
	"strings"
	"testing"
)

func TestReadInput(t *testing.T) {
	in, err := ReadInput(strings.NewReader(`{"session_id":"s1","cwd":"/x","hook_event_name":"Stop","stop_hook_active":true,"last_assistant_message":"hi"}`))
	if err != nil || in.SessionID != "s1" || !in.StopHookActive || in.LastAssistantMessage != "hi" {
		t.Fatal(in, err)
	}
	for _, bad := range []string{"", "{", `{"hook_event_name":"PreToolUse"}`} {
		if _, err := ReadInput(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
}

func TestScopeAndBlockLimit(t *testing.T) {
	a := &Armed{}
	if mine, _ := a.Scope("s1"); !mine || a.SessionID != "s1" {
		t.Fatal("first call records its session")
	}
	if mine, _ := a.Scope("s2"); mine {
		t.Fatal("another session is never blocked")
	}
	for i := 0; i < claudeBlockLimit; i++ {
		a.Blocked(i > 0)
	}
	if !a.LimitReached {
		t.Fatal("8 consecutive blocks reach Claude's limit")
	}
	if mine, adopted := a.Scope("s3"); !mine || !adopted || a.SessionID != "s3" || a.ConsecutiveBlocks != 0 {
		t.Fatalf("a continuation after the limit takes the loop over: %+v", a)
	}
	a.Blocked(true)
	a.Blocked(false)
	if a.ConsecutiveBlocks != 1 {
		t.Fatal("a user turn resets the count")
	}
}

// A call without a session id never takes or clears the loop's owner: it
// is the loop's only while nobody owns it, and the owner keeps the loop.
func TestScopeEmptySessionID(t *testing.T) {
	a := &Armed{}
	if mine, _ := a.Scope(""); !mine || a.SessionID != "" {
		t.Fatalf("unowned loop, empty id: mine=%v owner=%q", mine, a.SessionID)
	}
	if mine, _ := a.Scope("s1"); !mine || a.SessionID != "s1" {
		t.Fatalf("first real session: mine=%v owner=%q", mine, a.SessionID)
	}
	if mine, _ := a.Scope(""); mine || a.SessionID != "s1" {
		t.Fatalf("owned loop, empty id: mine=%v owner=%q", mine, a.SessionID)
	}
	if mine, _ := a.Scope("s1"); !mine {
		t.Fatal("the owner lost its loop after an empty-id call")
	}
	if mine, _ := a.Scope("s2"); mine {
		t.Fatal("another session was taken for the owner")
	}
}
