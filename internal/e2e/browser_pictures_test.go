package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-loop/ralph/internal/engine"
	"github.com/ralph-loop/ralph/internal/judge"
)

// The colours the pictures draw passed and failed in (the page's
// palette).
var (
	passedRGB = [3]int{0x00, 0x9E, 0x73}
	failedRGB = [3]int{0xD5, 0x5E, 0x00}
)

// TestBrowserPictures: a `ralph run --parallel 2` of six stories, one of
// which fails its first attempt and passes on the retry, watched in
// headless Chromium through `ralph serve` opened before the run began.
// The page shows the run's pictures once it starts and keeps them up to
// date over the event stream (no reload): at the end the timeline has a
// bar per iteration (seven: six passed, one failed) and the DAG a node
// per story. At 1400×900 and 390×844 the bars, the nodes and the story
// page's evidence are on the screenshot, in their colours where the DOM
// says they are. Attempts read 1/2 for a story that passed at once in
// the page and in `ralph status`; the finished run offers no pause or
// stop. $RALPH_SCREENSHOTS, when set, is where the screenshots go (the
// ones in docs/ come from here).
func TestBrowserPictures(t *testing.T) {
	flags := t.TempDir()
	dir := newRepo(t, map[string]string{
		"prd.json": `{"project":"shop","branch_name":"ralph/checkout","quality_checks":{"test":"sh check.sh"},"user_stories":[
{"id":"S-1","title":"Cart model","priority":1,"description":"A cart holds items and quantities.","acceptance_criteria":["adding an item twice sums its quantity","an empty cart totals 0"],"checks":["test -f S-1.txt"]},
{"id":"S-2","title":"Price rules","priority":2,"depends_on":["S-1"],"checks":["test -f S-2.txt"]},
{"id":"S-3","title":"Tax","priority":3,"depends_on":["S-1"],"checks":["test -f S-3.txt"]},
{"id":"S-4","title":"Checkout API","priority":4,"depends_on":["S-2"],"acceptance_criteria":["a cart checks out once"],"checks":["test -f S-4.txt"]},
{"id":"S-5","title":"Receipts","priority":5,"depends_on":["S-3"],"checks":["test -f S-5.txt"]},
{"id":"S-6","title":"Order history","priority":6,"depends_on":["S-4","S-5"],"checks":["test -f S-6.txt"]}]}`,
		"check.sh": "sleep 0.3\ntest ! -f bad.txt\n",
		// Each story's check fails until its agent writes its file: the
		// evidence a judge asks for. S-1 waits for the page (a flag
		// outside the repository: the stories work in trees of their
		// own); S-4's first attempt leaves a file the gate refuses, its
		// retry removes it. Each reports its usage.
		"agent.sh": `cat > /dev/null
if [ "$RALPH_ITEM_ID" = S-1 ]; then while [ ! -f ` + flags + `/go ]; do sleep 0.1; done; fi
if [ "$RALPH_ITEM_ID" = S-4 ]; then
  if [ ! -f ` + flags + `/s4 ]; then touch ` + flags + `/s4; echo bad > bad.txt; else rm -f bad.txt; fi
fi
echo "working on $RALPH_ITEM_ID"
echo "$RALPH_ITEM_ID" > "$RALPH_ITEM_ID.txt"
sleep 1
n=$(printf %s "$RALPH_ITEM_ID" | tr -dc 0-9)
echo "RALPH_USAGE: {\"input_tokens\": $((12000 + n * 3100)), \"output_tokens\": $((1800 + n * 400)), \"cost_usd\": 0.$((11 + n * 7))}"
echo '<promise>COMPLETE</promise>'
`,
	})
	// The repository's name is on the pages (and the screenshots).
	shop := filepath.Join(filepath.Dir(dir), "shop")
	if err := os.Rename(dir, shop); err != nil {
		t.Fatal(err)
	}
	dir = shop
	p := engine.PathsFor(dir)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	self, _ := os.Executable()
	env := append(os.Environ(), asRalph+"=1", "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")
	url := startServe(ctx, t, self, dir, env)
	base, token, _ := strings.Cut(url, "?token=")

	page := startChromium(ctx, t)
	page.open(url)
	page.waitFor(`!!document.getElementById("no-run")`)

	run := exec.CommandContext(ctx, self, "run", "--plain", "--no-sandbox", "--parallel", "2", "--max-attempts", "2", "--max-cost", "3", "--agent", "cmd", "--agent-cmd", "sh agent.sh")
	run.Dir, run.Env = dir, env
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.WriteFile(filepath.Join(flags, "go"), nil, 0o644); _ = run.Wait() }()

	// The run began: the page took its pictures (one reload); from here
	// on they change over the event stream alone.
	page.waitFor(`!!document.querySelector("#timeline-svg g.bar.running") && !!document.querySelector('#dag-svg g.node[data-id="S-1"]')`)
	page.eval(`window.keptSinceTheRunBegan = true`)
	if err := os.WriteFile(filepath.Join(flags, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("the run: %v\n%s", err, out.String())
	}
	page.waitFor(`document.querySelectorAll("#timeline-svg g.bar").length === 7 && document.querySelectorAll("#dag-svg g.node.passed").length === 6 && !document.querySelector("#timeline-svg g.bar.running")`)
	if page.eval(`window.keptSinceTheRunBegan === true`) != true {
		t.Error("the page reloaded: the pictures did not come over the event stream")
	}

	// The DOM: a bar per iteration with its outcome, its hover text; a
	// node per story; attempts; no controls on the finished run.
	bars := page.eval(`Array.from(document.querySelectorAll("#timeline-svg g.bar")).map(function(g){return g.dataset.item + ":" + g.dataset.outcome}).sort().join(" ")`)
	if bars != "S-1:passed S-2:passed S-3:passed S-4:failed S-4:passed S-5:passed S-6:passed" {
		t.Errorf("the timeline's bars: %v", bars)
	}
	if tip := page.eval(`document.querySelector('#timeline-svg g.bar.failed title').textContent`).(string); !strings.Contains(tip, "S-4 Checkout API · iteration") || !strings.Contains(tip, "attempt 1/2 · worker (cmd)") ||
		!strings.Contains(tip, "✗ failed after") || !strings.Contains(tip, "tokens, $0.") {
		t.Errorf("the failed bar's hover text: %q", tip)
	}
	if n := page.eval(`document.querySelectorAll("#dag-svg g.node").length`); n != float64(6) {
		t.Errorf("%v nodes in the DAG, want 6", n)
	}
	if s := page.eval(`document.querySelector("#item-S-1").textContent + "|" + document.querySelector("#item-S-4").textContent`).(string); !strings.Contains(s, "passed1/2L1") || !strings.Contains(s, "passed2/2L3S-2") {
		t.Errorf("the items' attempts: %q", s)
	}
	// Once the run's process is gone its controls go (over the stream).
	page.waitFor(`document.getElementById("status").textContent.includes("complete") && !(document.getElementById("pause") || document.getElementById("stop") || document.getElementById("resume"))`)
	if status := ralph(t, dir, nil, "status"); !strings.Contains(status.stdout, "| S-1 | Cart model | ✅ passed | 1/2 |") || !strings.Contains(status.stdout, "| S-4 | Checkout API | ✅ passed | 2/2 |") {
		t.Errorf("ralph status counts attempts otherwise:\n%s", status)
	}

	// The JSON behind each picture.
	api := func(path string, v any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(base, "/")+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
	}
	var tl struct {
		Slots int
		Rows  []struct{ Name string }
		Bars  []struct{ Item, Outcome string } `json:"iterations"`
		Best  *struct {
			BoundMS int64 `json:"bound_ms"`
		}
	}
	api("/api/timeline", &tl)
	if tl.Slots != 2 || len(tl.Rows) != 2 || len(tl.Bars) != 7 || tl.Best == nil || tl.Best.BoundMS <= 0 {
		t.Errorf("/api/timeline: %+v", tl)
	}
	var dag struct {
		Nodes []struct{ ID, Status string }
		Edges []struct{ From, To string }
	}
	api("/api/dag", &dag)
	if len(dag.Nodes) != 6 || len(dag.Edges) != 6 {
		t.Errorf("/api/dag: %+v", dag)
	}
	var cost struct {
		BudgetUSD float64 `json:"budget_usd"`
		Points    []struct{ Iteration int }
		Passes    []struct{ Item string }
	}
	api("/api/cost", &cost)
	if cost.BudgetUSD != 3 || len(cost.Points) != 7 || len(cost.Passes) != 6 {
		t.Errorf("/api/cost: %+v", cost)
	}

	shots := os.Getenv("RALPH_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	// A wide screen and a phone's.
	sizes := []struct {
		name          string
		width, height int
		mobile        bool
	}{{"", 1400, 900, false}, {"-phone", 390, 844, true}}
	for _, size := range sizes {
		page.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": size.width, "height": size.height, "deviceScaleFactor": 1, "mobile": size.mobile})
		page.open(strings.TrimSuffix(base, "/") + "/?repo=0")
		page.waitFor(`document.querySelectorAll("#timeline-svg g.bar").length === 7`)
		img := page.screenshot(t, filepath.Join(shots, "web-run"+size.name+".png"))
		// The first bar and the first node are on the screen, in the
		// colour of a pass; the failed bar in its own.
		page.seen(t, img, `#timeline-svg g.bar.passed rect.fill`, passedRGB, true)
		page.seen(t, img, `#timeline-svg g.bar.failed rect.fill`, failedRGB, true)
		page.seen(t, img, `#dag-svg g.node[data-id="S-1"] rect`, passedRGB, true)
	}

	// S-4's page: the judge's record of its retry (the test writes it
	// where the judge keeps it), its two iterations, its transcript.
	contract := &judge.Contract{Item: "S-4", Base: loadState(t, dir).Items["S-2"].Commit, Gates: []string{"test: sh check.sh"}, Checks: []string{"S-4 check 1: test -f S-4.txt"},
		Protected: []string{"check.sh"}, RedAtBase: []judge.TestRef{{Gate: "S-4 check 1"}}, GreenAtBase: 1}
	j := judge.Judgement{Item: "S-4", Iteration: loadState(t, dir).Items["S-4"].Iterations[1], Attempt: 2, Claimed: true, Passed: true, Summary: "test passed, S-4 check 1 passed",
		Checks: []judge.CheckResult{{Check: "protected files", OK: true, Detail: "check.sh unchanged"}, {Check: "evidence", OK: true}}, Contract: contract,
		Evidence: []judge.Evidence{{Kind: judge.EvidenceFixed, Gate: "S-4 check 1"}}, Files: []judge.FileStat{{Path: "S-4.txt", Added: 1}}}
	if err := judge.Append(p.Dir, j); err != nil {
		t.Fatal(err)
	}
	for _, size := range sizes {
		page.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": size.width, "height": size.height, "deviceScaleFactor": 1, "mobile": size.mobile})
		page.open(strings.TrimSuffix(base, "/") + "/items/S-4?repo=0")
		page.waitFor(`!!document.querySelector("#evidence #verdict")`)
		if size.mobile { // the evidence comes after the criteria
			page.eval(`document.getElementById("evidence").scrollIntoView({block: "start"})`)
		}
		img := page.screenshot(t, filepath.Join(shots, "web-story"+size.name+".png"))
		page.seen(t, img, `#verdict .pill`, passedRGB, true)
		ev := page.eval(`document.getElementById("evidence").innerText`).(string)
		for _, want := range []string{"✓ passed", "S-4 check 1 failed at the base and passes", "Acceptance contract", "Red at the base", "Protected files", "The judge's checks: 2 of 2 passed"} {
			if !strings.Contains(ev, want) {
				t.Errorf("S-4's evidence (%dx%d) lacks %q:\n%s", size.width, size.height, want, ev)
			}
		}
	}
	story := page.eval(`document.body.textContent`).(string) // the folded parts too
	for _, want := range []string{"a cart checks out once", "test -f S-4.txt", "2/2", "✗ failed", "## Agent output", "working on S-4", "=== gate test: FAILED"} {
		if !strings.Contains(story, want) {
			t.Errorf("S-4's page lacks %q:\n%s", want, story)
		}
	}
	if n := page.eval(`document.querySelectorAll("#iterations tr[id^=iteration-]").length`); n != float64(2) {
		t.Errorf("S-4's page lists %v iterations, want 2", n)
	}
	// A story the judge kept no record of says so.
	if _, err := os.Stat(judge.JudgedFile(p.Dir, "S-1")); os.IsNotExist(err) {
		page.open(strings.TrimSuffix(base, "/") + "/items/S-1?repo=0")
		if page.eval(`!!document.getElementById("no-judgement") && document.getElementById("attempts").textContent === "1/2"`) != true {
			t.Errorf("S-1's page: %v", page.eval(`document.getElementById("story").innerText + " | " + document.getElementById("evidence").innerText`))
		}
	}
}

// screenshot captures the page as it shows now, saves it at path and
// returns it.
func (c *cdp) screenshot(t *testing.T, path string) image.Image {
	t.Helper()
	var r struct{ Data string }
	if err := json.Unmarshal(c.call("Page.captureScreenshot", map[string]any{"format": "png"}), &r); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// seen checks that the element sel is on the screenshot img where the DOM
// puts it, in about the colour want (most of a row of pixels across its
// middle: a hatched bar has stripes); must says it has to be on the
// screen at all.
func (c *cdp) seen(t *testing.T, img image.Image, sel string, want [3]int, must bool) {
	t.Helper()
	box, ok := c.eval(fmt.Sprintf(`(function(){var e=document.querySelector(%q); if(!e) return null; var r=e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]})()`, sel)).([]any)
	if !ok || len(box) != 4 {
		t.Errorf("no %s in the page", sel)
		return
	}
	x, y, w, h := box[0].(float64), box[1].(float64), box[2].(float64), box[3].(float64)
	bounds := img.Bounds()
	if w < 3 || h < 3 || x < 0 || y < 0 || x+w > float64(bounds.Dx()) || y+h > float64(bounds.Dy()) {
		if must {
			t.Errorf("%s is not on the %dx%d screen: at %.0f,%.0f size %.0fx%.0f", sel, bounds.Dx(), bounds.Dy(), x, y, w, h)
		}
		return
	}
	near, all := 0, 0
	cy := int(y + h/2)
	for px := int(x + 2); px < int(x+w-2); px++ {
		r, g, b, _ := img.At(px, cy).RGBA()
		d := math.Sqrt(math.Pow(float64(int(r>>8)-want[0]), 2) + math.Pow(float64(int(g>>8)-want[1]), 2) + math.Pow(float64(int(b>>8)-want[2]), 2))
		all++
		if d < 60 {
			near++
		}
	}
	if all == 0 || near*3 < all {
		t.Errorf("%s at %.0f,%.0f: %d of %d pixels in the colour %v", sel, x, y, near, all, want)
	}
}
