package early

import (
	"strings"
	"testing"
)

func TestParseComplete(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	none := env()
	for _, tc := range []struct {
		args   string
		getenv func(string) string
		want   completeArgs
		ok     bool
	}{
		{"task complete A.1 --file t.jsonl", none, completeArgs{ID: "A.1", File: "t.jsonl"}, true},
		{"task complete A.1 --commit abc --file t.jsonl", none, completeArgs{"A.1", "abc", "t.jsonl"}, true},
		{"task complete --commit=abc --file=t.jsonl A.1", none, completeArgs{"A.1", "abc", "t.jsonl"}, true},
		{"task complete --file t.jsonl A.1 --commit abc", none, completeArgs{"A.1", "abc", "t.jsonl"}, true},
		{"task complete A.1", env("RALPH_TASKS_FILE", "/x/t.jsonl"), completeArgs{ID: "A.1", File: "/x/t.jsonl"}, true},
		{"task complete A.1 --file t.jsonl", env("RALPH_TASKS_FILE", "/x/t.jsonl"), completeArgs{ID: "A.1", File: "t.jsonl"}, true},
		// Inside another loop's iteration only one of the two is set.
		{"task complete A.1 --file t.jsonl", env("RALPH_ITEM_ID", "A.1"), completeArgs{ID: "A.1", File: "t.jsonl"}, true},

		// Everything else is the full command's.
		{"task complete A.1", none, completeArgs{}, false},                                                             // the file comes from git
		{"task complete A.1 --file t.jsonl", env("RALPH_ITEM_ID", "A.1", "RALPH_RUN_ID", "r1"), completeArgs{}, false}, // a loop iteration
		{"task complete --file t.jsonl", none, completeArgs{}, false},
		{"task complete A.1 B --file t.jsonl", none, completeArgs{}, false},
		{"task complete A.1 --file t.jsonl --file u.jsonl", none, completeArgs{}, false},
		{"task complete A.1 --file t.jsonl --commit", none, completeArgs{}, false},
		{"task complete A.1 --file t.jsonl --commit --help", none, completeArgs{}, false},
		{"task complete A.1 --file= ", none, completeArgs{}, false},
		{"task complete A.1 --file t.jsonl --help", none, completeArgs{}, false},
		{"task complete A.1 --file t.jsonl -h", none, completeArgs{}, false},
		{"task complete A.1 --file t.jsonl --json", none, completeArgs{}, false},
		{"task complete A.1 --file t.jsonl --", none, completeArgs{}, false},
		{"task complete", none, completeArgs{}, false},
		{"task next --file t.jsonl", none, completeArgs{}, false},
		{"--version", none, completeArgs{}, false},
		{"", none, completeArgs{}, false},
	} {
		got, ok := parseComplete(strings.Fields(tc.args), tc.getenv)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("parseComplete(%q) = %+v, %v; want %+v, %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
}
