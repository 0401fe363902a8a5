package git

import (
	"strings"
	"testing"
)

func TestBranchNameRules(t *testing.T) {
	for name, want := range map[string]string{
		"ralph/login":        "",
		"feature/x-1.2":      "",
		"refs/heads/feature": "without refs/heads/",
		"feature/../x":       "'..'",
		"-x":                 "begin with '-'",
		"a..b":               "'..'",
		"x@{1}":              "'@{'",
		"x.lock":             "'.lock'",
		"a/.hidden":          "begin with '.'",
		"a b":                `" "`,
		"a:b":                `":"`,
		"tab\there":          `"\t"`,
		"x/":                 "'/'",
		"x.":                 "end with '.'",
		"@":                  "'@'",
	} {
		got := BranchNameProblem(name)
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("BranchNameProblem(%q) = %q, want %q", name, got, want)
		}
	}
}
