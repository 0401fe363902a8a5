package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ralph-loop/ralph/internal/config"
	"github.com/ralph-loop/ralph/internal/usage"
)

// builtinDefaults are the values a setting takes when neither a flag nor
// a config file sets it, as `ralph config` shows them.
var builtinDefaults = map[string]string{
	"agent": "claude", "prd": "prd.json in the repository root", "promise": "COMPLETE",
	"max_iterations": "10 × stories", "max_attempts": "3", "iteration_timeout": "60m", "gate_timeout": "10m",
	"parallel": "1", "breaker": "5", "transcript_max_bytes": "50 MB", "rate_limit_backoff": "1m (doubling to 30m)",
	"interval": "30s", "max_item_iterations": "10", "council": "3", "progress_budget_tokens": "2000",
	"test_fix_role": "debugger", "summarizer": "the run's agent", "sandbox": "on (bubblewrap)",
}

// configFlags are the run flags whose name is not the key's with dashes.
var configFlags = map[string]string{"agent_args": "agent-arg", "progress_budget_tokens": "progress-budget", "gates": "gate",
	"sandbox": "no-sandbox", "env": "", "api_key_env": ""}

// setting is one line of `ralph config`.
type setting struct {
	Key    string          `json:"key"`
	Value  string          `json:"value"`
	From   string          `json:"from"` // flag | repo | user | default
	Origin []config.Origin `json:"origin,omitempty"`
	Flag   string          `json:"flag,omitempty"`
}

// newCmdConfig builds `ralph config`.
func newCmdConfig(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config [--json] [RUN FLAGS…]",
		Short: "Print the effective settings and where each comes from",
		Long: `Print every setting a run would use and where it comes from: a flag given
here (the same flags as ` + "`ralph run`" + `), the repository's .ralph/config.yaml
(file:line), your own config, $XDG_CONFIG_HOME/ralph/config.yaml (default
~/.config/ralph/config.yaml; file:line), or ralph's built-in default. Flags
win over the repository's file, which wins over yours; the sandbox's lists
(writable, hidden, allow_hosts) add up. Both files take the same keys and
are read strictly: an unknown key is an error naming the file and line.
--json prints the same as JSON.`,
		Example: `  ralph config
  ralph config --agent codex --json`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON := false
			var rest []string
			for _, a := range args {
				switch a {
				case "--json":
					asJSON = true
				case "-h", "--help":
					return cmd.Help()
				default:
					rest = append(rest, a)
				}
			}
			// The run's own flags, parsed by the run command itself.
			var flags *pflag.FlagSet
			run := newCmdRun(f, func(*RunOptions) error { return nil })
			run.SetArgs(rest)
			run.SetOut(f.IO.ErrOut)
			run.SetErr(f.IO.ErrOut)
			run.SilenceUsage, run.SilenceErrors = true, true
			run.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &commandLineError{err: err, cmd: cmd} })
			if err := run.ExecuteContext(cmd.Context()); err != nil {
				return err
			}
			flags = run.Flags()
			repoFile := ""
			if root, _, err := f.Repo(cmd.Context()); err == nil {
				repoFile = filepath.Join(root, ".ralph", "config.yaml")
			}
			l, err := config.LoadLayered(repoFile)
			if err != nil {
				return usage.Errorf("%v", err)
			}
			list := effectiveSettings(l, repoFile, flags)
			if asJSON {
				return writeJSON(f.IO.Out, map[string]any{"repo_config": repoFile, "user_config": config.UserPath(), "settings": list})
			}
			fmt.Fprintf(f.IO.Out, "repository config: %s\nuser config:       %s\n\n", orNone(repoFile), orNone(config.UserPath()))
			tw := tabwriter.NewWriter(f.IO.Out, 0, 0, 2, ' ', 0)
			for _, s := range list {
				where := s.From
				switch s.From {
				case "flag":
					where = "flag --" + s.Flag
				case "repo", "user":
					var at []string
					for _, o := range s.Origin {
						at = append(at, o.String())
					}
					where = strings.Join(at, " + ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Key, s.Value, where)
			}
			return tw.Flush()
		},
	}
	return cmd
}

// effectiveSettings is every key's value and where it came from.
func effectiveSettings(l *config.Layered, repoFile string, flags *pflag.FlagSet) []setting {
	var out []setting
	for _, key := range config.Keys() {
		name, ok := configFlags[key]
		if !ok {
			name = strings.ReplaceAll(key, "_", "-")
		}
		s := setting{Key: key}
		fl := flags.Lookup(name)
		switch {
		case fl != nil && fl.Changed:
			s.From, s.Flag, s.Value = "flag", name, fl.Value.String()
			if sv, ok := fl.Value.(pflag.SliceValue); ok {
				s.Value = strings.Join(sv.GetSlice(), ", ")
			}
		case len(l.From[key]) > 0:
			s.Origin = l.From[key]
			s.From = "user"
			if slices.ContainsFunc(s.Origin, func(o config.Origin) bool { return o.File == repoFile }) {
				s.From = "repo"
			}
			s.Value = showValue(l.Value(key))
		default:
			s.From, s.Value = "default", builtinDefaults[key]
			if s.Value == "" {
				s.Value = "—"
			}
		}
		out = append(out, s)
	}
	return out
}

// showValue is a config value on one line.
func showValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case config.Duration:
		return time.Duration(x).String()
	case *int:
		if x != nil {
			return fmt.Sprint(*x)
		}
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Struct {
		// A section: its settings that are set, by their keys.
		var parts []string
		for i := 0; i < rv.NumField(); i++ {
			if fv := rv.Field(i); !fv.IsZero() && !(fv.Kind() == reflect.Slice && fv.Len() == 0) {
				key, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("yaml"), ",")
				parts = append(parts, key+": "+showValue(fv.Interface()))
			}
		}
		return "{" + strings.Join(parts, "; ") + "}"
	}
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return showValue(rv.Elem().Interface())
	}
	if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Map {
		b, _ := json.Marshal(v)
		return string(b)
	}
	return fmt.Sprint(v)
}

func orNone(p string) string {
	if p == "" {
		return "(none)"
	}
	return p
}
