package engine

import (
	"regexp"
	"strings"
)

var promiseRe = regexp.MustCompile(`(?s)<promise>\s*(.*?)\s*</promise>`)

// DetectPromise reports whether the agent's final message carries
// <promise>want</promise>. Only the final message is searched (never the
// transcript); fenced code blocks are ignored (tool output quoted back);
// and a line that appears verbatim in the prompt does not count, so an
// agent that echoes its instructions ("end with <promise>…</promise> when
// done") has not promised anything. A prompt line that is nothing but the
// tag is not used for that filter: an honest agent answers with exactly it.
func DetectPromise(final, want, prompt string) bool {
	if want == "" {
		return false
	}
	text := stripFences(final)
	promptLines := map[string]bool{}
	for _, l := range strings.Split(prompt, "\n") {
		if t := strings.TrimSpace(l); t != "" && strings.TrimSpace(promiseRe.ReplaceAllString(t, "")) != "" {
			promptLines[t] = true
		}
	}
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if !strings.Contains(t, "<promise>") || promptLines[t] {
			continue
		}
		for _, m := range promiseRe.FindAllStringSubmatch(t, -1) {
			if strings.TrimSpace(m[1]) == want {
				return true
			}
		}
	}
	// A promise split over lines (`<promise>\nDONE\n</promise>`).
	for _, m := range promiseRe.FindAllStringSubmatch(text, -1) {
		if strings.TrimSpace(m[1]) == want && strings.Contains(m[0], "\n") && !strings.Contains(prompt, m[0]) {
			return true
		}
	}
	return false
}

// stripFences removes ``` and ~~~ fenced blocks.
func stripFences(s string) string {
	var out []string
	in := false
	fence := ""
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		if !in && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
			in, fence = true, t[:3]
			continue
		}
		if in {
			if strings.HasPrefix(t, fence) {
				in = false
			}
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// extractLearnings collects what the agent reported under a `## Learnings`
// heading (any level) and on `LEARNING:` lines.
func extractLearnings(final string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		s = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s), "-*• "))
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	inSection := false
	for _, line := range strings.Split(stripFences(final), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") {
			h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(t, "#")))
			inSection = h == "learnings" || strings.HasPrefix(h, "learnings")
			continue
		}
		if rest, ok := cutPrefixFold(t, "LEARNING:"); ok {
			add(rest)
			continue
		}
		if inSection && t != "" && !strings.Contains(t, "<promise>") {
			add(t)
		}
	}
	return out
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}
