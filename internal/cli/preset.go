package cli

import (
	"github.com/ralph-loop/ralph/internal/app"
	"github.com/ralph-loop/ralph/internal/usage"
)

// app.PresetNova is Nova26's Ralph loop as a preset: the bounds of its
// ralphLoop — iterations = items × 3, one retry with the failure's
// context (two attempts), every item's plan written first and approved
// at once (its planApproval logs the plan and goes on), and the
// test → fix → retest loop (autoTestFix) after a failed test gate.
const presetNova = app.PresetNova

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
