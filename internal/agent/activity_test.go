package agent

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The steps read from each CLI's real output (recorded from the pinned
// CLIs against the scripted LLM server): the file written, the command
// run, the final message.
func TestActivityFromRealStreams(t *testing.T) {
	for agent, want := range map[string][]string{
		"claude":   {"tool Write mark.sh", "output File created successfully", "tool Bash sh mark.sh && rm mark.sh", "text Made the story's file with mark.sh."},
		"codex":    {"tool Bash cat > mark.sh", "tool Bash sh mark.sh && rm mark.sh", "text Made the story's file with mark.sh."},
		"opencode": {"tool Write /work/repo/mark.sh", "tool Bash sh mark.sh && rm mark.sh", "text Made the story's file with mark.sh."},
		"gemini":   {"tool write_file /work/repo/mark.sh", "tool run_shell_command sh mark.sh && rm mark.sh", "text Made the story's file"},
	} {
		f, err := os.Open(filepath.Join("testdata", "activity", agent+".stream"))
		if err != nil {
			t.Fatal(err)
		}
		r := &ActivityReader{Agent: agent}
		var got []string
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		text := ""
		for sc.Scan() {
			for _, s := range r.Line(sc.Bytes()) {
				if s.Kind == "text" && s.Delta {
					text += s.Text
					continue
				}
				if text != "" {
					got = append(got, "text "+text)
					text = ""
				}
				got = append(got, s.Kind+" "+s.Text)
			}
		}
		if text != "" {
			got = append(got, "text "+text)
		}
		f.Close()
		all := strings.Join(got, "\n")
		at := 0
		for _, w := range want {
			i := strings.Index(all[at:], w)
			if i < 0 {
				t.Errorf("%s: no %q after position %d in:\n%s", agent, w, at, all)
				break
			}
			at += i + len(w)
		}
		if strings.Contains(all, "You are one iteration") {
			t.Errorf("%s: the prompt shown as activity:\n%s", agent, all)
		}
	}
}
