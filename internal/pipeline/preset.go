package pipeline

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
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

// LoadPreset parses a built-in pipeline (prompts from the binary).
func LoadPreset(name, prd string) (*Pipeline, error) {
	files, err := PresetFiles(name, prd)
	if err != nil {
		return nil, err
	}
	return parse(name+" (built-in)", []byte(files["pipeline.yaml"]), func(p string) ([]byte, error) {
		s, ok := files[path.Clean(p)]
		if !ok {
			return nil, fmt.Errorf("%s: not in the built-in pipeline", p)
		}
		return []byte(s), nil
	})
}
