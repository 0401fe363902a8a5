package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagGroupKey annotates a flag with the heading it is listed under in
// --help.
const flagGroupKey = "ralph_group"

// groupFlags files each named flag under heading, in the order given;
// usageWithGroups then lists them group by group.
func groupFlags(cmd *cobra.Command, groups []flagGroup) {
	for _, g := range groups {
		for _, name := range g.flags {
			if cmd.Flags().Lookup(name) == nil {
				panic("groupFlags: no flag --" + name) // a renamed flag must be regrouped
			}
			_ = cmd.Flags().SetAnnotation(name, flagGroupKey, []string{g.title})
		}
	}
	titles := make([]string, len(groups))
	for i, g := range groups {
		titles[i] = g.title
	}
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		return usageWithGroups(c, titles, true)
	})
	// --help prints the whole description already: no pointer to itself.
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		w := c.OutOrStdout()
		if desc := strings.TrimSpace(c.Long); desc != "" {
			fmt.Fprintf(w, "%s\n\n", desc)
		} else if c.Short != "" {
			fmt.Fprintf(w, "%s\n\n", c.Short)
		}
		c.SetOut(w)
		_ = usageWithGroups(c, titles, false)
	})
}

type flagGroup struct {
	title string
	flags []string
}

// usageWithGroups is cobra's usage with the flags listed under their
// groups' headings (the ungrouped ones last, under "Other flags").
// hint adds the pointer to --help (a usage error's).
func usageWithGroups(c *cobra.Command, titles []string, hint bool) error {
	w := c.OutOrStderr()
	fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
	if c.HasExample() {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
	}
	sets := map[string]*pflag.FlagSet{}
	other := pflag.NewFlagSet("other", pflag.ContinueOnError)
	for _, t := range titles {
		sets[t] = pflag.NewFlagSet(t, pflag.ContinueOnError)
	}
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if g := f.Annotations[flagGroupKey]; len(g) == 1 && sets[g[0]] != nil {
			sets[g[0]].AddFlag(f)
			return
		}
		other.AddFlag(f)
	})
	for _, t := range titles {
		if sets[t].HasFlags() {
			fmt.Fprintf(w, "\n%s:\n%s", t, sets[t].FlagUsages())
		}
	}
	if other.HasFlags() {
		fmt.Fprintf(w, "\nOther flags:\n%s", other.FlagUsages())
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(w, "\nGlobal flags:\n%s", c.InheritedFlags().FlagUsages())
	}
	if hint {
		fmt.Fprintf(w, "\nUse \"%s --help\" for the whole description.\n", strings.TrimSpace(c.CommandPath()))
	}
	return nil
}
