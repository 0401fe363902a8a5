package cli

import (
	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/usage"
)

// presetNova is Nova26's Ralph loop as a preset: the bounds of its
// ralphLoop — iterations = items × 3, one retry with the failure's
// context (two attempts), every item's plan written first and approved
// at once (its planApproval logs the plan and goes on), and the
// test → fix → retest loop (autoTestFix) after a failed test gate.
const presetNova = "nova"

// novaTestFixes is Nova26's test-fix loop's re-runs per attempt.
const novaTestFixes = 3

// applyPreset fills what --preset (or preset: in the config) names into
// the settings no flag gave.
func (o *RunOptions) applyPreset() error {
	switch o.Preset {
	case "":
		return nil
	case presetNova:
	default:
		return usage.Errorf("--preset %q: the presets are %s (Nova26's bounds)", o.Preset, presetNova)
	}
	set := o.flagSet
	if set == nil {
		set = func(string) bool { return false }
	}
	if !set("max-attempts") {
		o.MaxAttempts = 2
	}
	if !set("test-fix") {
		o.TestFix = novaTestFixes
	}
	if !set("plan-approval") {
		o.PlanApproval = true
	}
	if !set("auto-approve") {
		o.AutoApprove = true
	}
	return nil
}

// presetIterations is the run's iteration bound under the preset, once
// the source's items are known (0: the engine's default).
func (o *RunOptions) presetIterations(src engine.Source) int {
	if o.Preset != presetNova || (o.flagSet != nil && o.flagSet("max-iterations")) {
		return 0
	}
	return 3 * len(src.Items())
}
