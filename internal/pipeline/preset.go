package pipeline

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

//go:embed presets
var presetFS embed.FS

// DefaultPresetPRD is the PRD a preset refers to when none is given.
const DefaultPresetPRD = "PRD.md"

// Presets lists the built-in pipelines.
func Presets() []string {
	ents, _ := fs.ReadDir(presetFS, "presets")
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// IsPreset reports whether name is a built-in pipeline.
func IsPreset(name string) bool {
	for _, p := range Presets() {
		if p == name {
			return true
		}
	}
	return false
}

// PresetFiles returns the files of preset name with prd filled in:
// "pipeline.yaml" and "prompts/<stage>.md", for `ralph pipeline init` to
// write out for editing.
func PresetFiles(name, prd string) (map[string]string, error) {
	if !IsPreset(name) {
		return nil, fmt.Errorf("no built-in pipeline %q (built in: %s)", name, strings.Join(Presets(), ", "))
	}
	if prd == "" {
		prd = DefaultPresetPRD
	}
	root := path.Join("presets", name)
	out := map[string]string{}
	err := fs.WalkDir(presetFS, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := presetFS.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, root+"/")
		s := string(b)
		if rel == "pipeline.yaml" {
			s = strings.ReplaceAll(s, "{{PRD}}", strconv.Quote(prd))
		}
		out[rel] = s
		return nil
	})
	return out, err
}

// PRDPathTemplate makes a pagent prompt (.txt, with the word PRD_PATH
// where the PRD's full path goes) a template over the prompt data.
func PRDPathTemplate(text string) string {
	return strings.ReplaceAll(text, "PRD_PATH", "{{.PRDPath}}")
}

// PresetPromptDir is where a preset's prompts live for the user to see
// and edit, relative to the repository root (pagent's .claude/prompts,
// where tools written for pagent find them).
const PresetPromptDir = ".claude/prompts"

// LoadPreset parses a built-in pipeline. A prompt the user keeps in
// root/.claude/prompts (the same file name) replaces the binary's.
func LoadPreset(name, prd, root string) (*Pipeline, error) {
	files, err := PresetFiles(name, prd)
	if err != nil {
		return nil, err
	}
	return parse(name+" (built-in)", []byte(files["pipeline.yaml"]), func(p string) ([]byte, error) {
		if root != "" && path.Dir(path.Clean(p)) == "prompts" {
			if b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(PresetPromptDir), path.Base(p))); err == nil {
				return b, nil
			}
		}
		s, ok := files[path.Clean(p)]
		if !ok {
			return nil, fmt.Errorf("%s: not in the built-in pipeline", p)
		}
		return []byte(s), nil
	})
}
