package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/pipeline"
	"github.com/ralph-loop/ralph/internal/source"
	"github.com/ralph-loop/ralph/internal/store"
	"github.com/ralph-loop/ralph/internal/usage"
)

// newCmdPipeline builds `ralph pipeline`.
func newCmdPipeline(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use: "pipeline",
		Example: `  ralph pipeline init pagent --prd PRD.md
  ralph pipeline validate
  ralph run --pipeline .ralph/pipeline.yaml`,
		Short: "Create, validate and show pipelines (ordered stages with exit conditions)",
		Long: `A pipeline is an ordered list of stages; each has a prompt (a Go template
with {{.PRDPath}}, {{.Stage}}, {{.Iteration}}, …) and an exit condition the
harness checks in the tree after every iteration: file_lines {path, min},
dir_files {path, min, glob}, promise TEXT (in the agent's final message),
command [argv…] (exit 0), and all:/any: lists of these. A stage loops until
its condition holds (at most max_iterations times), is committed as
"pipeline(<stage>): … stage complete", and the next stage starts.

Run one with ` + "`ralph run --pipeline .ralph/pipeline.yaml`" + ` (or --pipeline pagent for
the built-in pipeline architect → qa → security → implementer → verifier
over PRD.md).`,
	}
	cmd.AddCommand(newCmdPipelineInit(f, nil), newCmdPipelineValidate(f, nil), newCmdPipelineShow(f, nil), newCmdPipelineStart(f, nil))
	return cmd
}

// PipelineInitOptions are `ralph pipeline init`'s settings.
type PipelineInitOptions struct {
	IO     *Factory
	Preset string
	PRD    string
	Dir    string
	Force  bool
}

// newCmdPipelineInit builds `ralph pipeline init`.
func newCmdPipelineInit(f *Factory, runF func(*PipelineInitOptions) error) *cobra.Command {
	opts := &PipelineInitOptions{IO: f}
	cmd := &cobra.Command{
		Use:   "init PRESET [--prd FILE] [--dir DIR]",
		Short: "Write a built-in pipeline (" + strings.Join(pipeline.Presets(), ", ") + ") out for editing",
		Long: `Write a built-in pipeline into DIR (default .ralph in the repository root):
pipeline.yaml and prompts/<stage>.md. Edit them, check with
` + "`ralph pipeline validate`" + `, run with ` + "`ralph run --pipeline DIR/pipeline.yaml`" + `.
Running it again changes nothing; files that differ from the preset are
kept unless --force.`,
		Example: `  ralph pipeline init pagent --prd my-prd.md`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Preset = args[0]
			if runF != nil {
				return runF(opts)
			}
			return pipelineInit(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.PRD, "prd", "", "the PRD `FILE` the prompts refer to (default "+pipeline.DefaultPresetPRD+")")
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "`DIR` to write into (default .ralph in the repository root)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite files that differ from the preset")
	return cmd
}

// pipelineBaseDir is the repository root, or the working directory outside
// one (and whether it is a repository).
func pipelineBaseDir(ctx context.Context, f *Factory) (string, bool, error) {
	if root, _, err := f.Repo(ctx); err == nil {
		return root, true, nil
	}
	wd, err := f.Getwd()
	return wd, false, err
}

func pipelineInit(ctx context.Context, o *PipelineInitOptions) error {
	f := o.IO
	if !pipeline.IsPreset(o.Preset) {
		return usage.Errorf("no built-in pipeline %q (built in: %s)", o.Preset, strings.Join(pipeline.Presets(), ", "))
	}
	root, inRepo, err := pipelineBaseDir(ctx, f)
	if err != nil {
		return err
	}
	wd, err := f.Getwd()
	if err != nil {
		return err
	}
	prd := o.PRD
	if prd != "" {
		abs := prd
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(wd, prd)
		}
		if rel, err := filepath.Rel(root, abs); err == nil && !strings.HasPrefix(rel, "..") {
			prd = filepath.ToSlash(rel)
		} else {
			prd = abs
		}
		if _, err := os.Stat(abs); err != nil {
			fmt.Fprintf(f.IO.ErrOut, "note: %s does not exist yet; write it before `ralph run`\n", o.PRD)
		}
	}
	dir := o.Dir
	switch {
	case dir == "":
		dir = filepath.Join(root, ".ralph")
	case !filepath.IsAbs(dir):
		dir = filepath.Join(wd, dir)
	}
	files, err := pipeline.PresetFiles(o.Preset, prd)
	if err != nil {
		return usage.Errorf("%v", err)
	}
	// The prompts go where the preset's own tools keep them
	// (.claude/prompts/*.txt, PRD_PATH in place of the PRD's path), and
	// the pipeline file points there.
	promptDir := filepath.Join(root, filepath.FromSlash(pipeline.PresetPromptDir))
	target := func(n string) string {
		if strings.HasPrefix(n, "prompts/") {
			return filepath.Join(promptDir, strings.TrimPrefix(n, "prompts/"))
		}
		return filepath.Join(dir, filepath.FromSlash(n))
	}
	if rel, err := filepath.Rel(dir, promptDir); err == nil {
		files["pipeline.yaml"] = strings.ReplaceAll(files["pipeline.yaml"], "prompt_file: prompts/", "prompt_file: "+filepath.ToSlash(rel)+"/")
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	// Check everything first: nothing is written when one file conflicts.
	var conflicts []string
	write := map[string]bool{}
	for _, n := range names {
		p := target(n)
		b, err := os.ReadFile(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			write[n] = true
		case err != nil:
			return err
		case string(b) == files[n]:
		case o.Force:
			write[n] = true
		default:
			conflicts = append(conflicts, pipelineRel(wd, p))
		}
	}
	switch len(conflicts) {
	case 0:
	case 1:
		return usage.Errorf("%s already exists and differs from the %s preset: kept (use --force to overwrite)", conflicts[0], o.Preset)
	default:
		return usage.Errorf("%s already exist and differ from the %s preset: kept (use --force to overwrite)", strings.Join(conflicts, ", "), o.Preset)
	}
	if inRepo && strings.HasPrefix(dir, filepath.Join(root, ".ralph")) {
		if _, repo, err := f.Repo(ctx); err == nil {
			_ = repo.EnsureExcluded(ctx, "/.ralph/")
		}
	}
	for _, n := range names {
		p := target(n)
		if !write[n] {
			fmt.Fprintf(f.IO.ErrOut, "kept    %s (unchanged)\n", pipelineRel(wd, p))
			continue
		}
		if err := store.WriteFile(p, []byte(files[n]), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(f.IO.ErrOut, "wrote   %s\n", pipelineRel(wd, p))
	}
	pf := pipelineRel(wd, filepath.Join(dir, "pipeline.yaml"))
	fmt.Fprintf(f.IO.ErrOut, "next: edit %s and its prompts (in %s: commit them, they are your project's), `ralph pipeline validate %s`, then `ralph run --pipeline %s`\n", pf, pipeline.PresetPromptDir, pf, pf)
	return nil
}

func pipelineRel(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// PipelineFileOptions are the settings of `ralph pipeline validate|show`.
type PipelineFileOptions struct {
	IO *Factory
	// File is a pipeline file or a built-in pipeline's name; empty: the
	// default file in the repository.
	File string
}

// pipelineFileCommand completes validate and show: the optional FILE
// argument, then runF (tests) or run.
func pipelineFileCommand(f *Factory, cmd *cobra.Command, runF func(*PipelineFileOptions) error, run func(context.Context, *PipelineFileOptions) error) *cobra.Command {
	opts := &PipelineFileOptions{IO: f}
	cmd.Args = cobra.MaximumNArgs(1)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 1 {
			opts.File = args[0]
		}
		if runF != nil {
			return runF(opts)
		}
		return run(c.Context(), opts)
	}
	return cmd
}

// load loads File, a preset name, or the default file.
func (o *PipelineFileOptions) load(ctx context.Context) (*pipeline.Pipeline, error) {
	spec := o.File
	if spec == "" {
		root, _, err := pipelineBaseDir(ctx, o.IO)
		if err != nil {
			return nil, err
		}
		spec = filepath.Join(root, pipeline.DefaultFile)
		if _, err := os.Stat(spec); err != nil {
			return nil, usage.Errorf("no %s here: pass FILE (or create one with `ralph pipeline init pagent --prd FILE`)", pipeline.DefaultFile)
		}
	}
	if _, err := os.Stat(spec); err != nil && pipeline.IsPreset(spec) {
		return pipeline.LoadPreset(spec, "", "")
	}
	return pipeline.Load(spec)
}

// newCmdPipelineValidate builds `ralph pipeline validate`.
func newCmdPipelineValidate(f *Factory, runF func(*PipelineFileOptions) error) *cobra.Command {
	return pipelineFileCommand(f, &cobra.Command{
		Use:     "validate [FILE]",
		Example: `  ralph pipeline validate pipeline.yaml`,
		Short:   "Check a pipeline file and print every problem (exit 2 when invalid)",
		Long: `Check a pipeline file (default .ralph/pipeline.yaml): strict YAML (an
unknown key is an error), stage names unique, a prompt or prompt_file that
exists and parses as a template, and an exit condition with sane values.
Every problem names file:line:col, the stage and the field. Writes nothing.`,
	}, runF, func(ctx context.Context, o *PipelineFileOptions) error {
		p, err := o.load(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(f.IO.Out, "%s: valid: pipeline %s, %s (%s)\n", p.File, p.Name, engine.Plural(len(p.Stages), "stage"), stageNames(p))
		return nil
	})
}

func stageNames(p *pipeline.Pipeline) string {
	var n []string
	for _, s := range p.Stages {
		n = append(n, s.Name)
	}
	return strings.Join(n, " → ")
}

// newCmdPipelineShow builds `ralph pipeline show`.
func newCmdPipelineShow(f *Factory, runF func(*PipelineFileOptions) error) *cobra.Command {
	return pipelineFileCommand(f, &cobra.Command{
		Use:     "show [FILE]",
		Example: `  ralph pipeline show pipeline.yaml`,
		Short:   "Print a pipeline's stages and exit conditions (and progress when a run exists)",
	}, runF, func(ctx context.Context, o *PipelineFileOptions) error {
		p, err := o.load(ctx)
		if err != nil {
			return err
		}
		var ps source.PipelineState
		if root, _, err := pipelineBaseDir(ctx, f); err == nil {
			_ = store.ReadJSON(filepath.Join(root, ".ralph", "pipeline.json"), &ps)
		}
		w := f.IO.Out
		fmt.Fprintf(w, "pipeline %s (%s)\n", p.Name, p.File)
		if p.PRD != "" {
			fmt.Fprintf(w, "prd: %s\n", p.PRD)
		}
		for i, s := range p.Stages {
			fmt.Fprintf(w, "%d. %s", i+1, s.Name)
			if s.Title != "" && s.Title != s.Name {
				fmt.Fprintf(w, " — %s", s.Title)
			}
			fmt.Fprintln(w)
			src := "inline prompt"
			if s.PromptFile != "" {
				src = "prompt " + s.PromptFile
			}
			fmt.Fprintf(w, "   %s\n", src)
			fmt.Fprintf(w, "   exit: %s\n", s.Exit.Describe())
			if s.MaxIterations > 0 {
				fmt.Fprintf(w, "   max iterations: %d\n", s.MaxIterations)
			}
			if ps.Pipeline == p.Name {
				for _, ss := range ps.Stages {
					if ss.Name == s.Name && (ss.Iterations > 0 || ss.Status != engine.ItemPending) {
						fmt.Fprintf(w, "   status: %s after %s\n", ss.Status, engine.Plural(ss.Iterations, "iteration"))
					}
				}
			}
		}
		return nil
	})
}
