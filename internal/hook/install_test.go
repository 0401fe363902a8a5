package hook

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func TestInstallMergeIdempotentUninstall(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(p), 0o755)
	orig := `{"z": 1, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify && beep"}]}], "PostToolUse": []}, "a": {"b": [1, 2.50]}}`
	os.WriteFile(p, []byte(orig), 0o600)
	res, err := Install(p, "/bin/ralph hook stop")
	if err != nil || !res.Changed || res.Action != "added" {
		t.Fatalf("install: %+v %v", res, err)
	}
	b, _ := os.ReadFile(p)
	s := string(b)
	if strings.Index(s, `"z"`) > strings.Index(s, `"hooks"`) || strings.Index(s, `"hooks"`) > strings.Index(s, `"a"`) {
		t.Errorf("key order lost:\n%s", s)
	}
	for _, want := range []string{`"notify && beep"`, `"/bin/ralph hook stop"`, `2.50`, `"PostToolUse": []`} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s:\n%s", want, s)
		}
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("mode changed to %v", st.Mode())
	}
	res, err = Install(p, "/bin/ralph hook stop")
	if err != nil || res.Changed {
		t.Fatalf("second install changed the file: %+v %v", res, err)
	}
	// A moved binary: the entry is replaced, not duplicated.
	res, err = Install(p, "/usr/local/bin/ralph hook stop")
	if err != nil || res.Action != "updated" {
		t.Fatalf("update: %+v %v", res, err)
	}
	b, _ = os.ReadFile(p)
	if strings.Count(string(b), "hook stop") != 1 {
		t.Fatalf("duplicate entries:\n%s", b)
	}
	res, err = Uninstall(p, "")
	if err != nil || res.Action != "removed" {
		t.Fatalf("uninstall: %+v %v", res, err)
	}
	b, _ = os.ReadFile(p)
	if strings.Contains(string(b), "hook stop") || !strings.Contains(string(b), "notify && beep") {
		t.Fatalf("after uninstall:\n%s", b)
	}
}

func TestInstallRefusesBadJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "settings.json")
	bad := "{\n  \"a\": 1,\n  \"b\" 2\n}\n"
	os.WriteFile(p, []byte(bad), 0o644)
	_, err := Install(p, "ralph hook stop")
	if err == nil || !strings.Contains(err.Error(), p+":3:7: ") {
		t.Fatalf("err = %v", err)
	}
	if e, ok := err.(*Error); !ok || !e.UsageError() {
		t.Fatalf("error type %T", err)
	}
	if b, _ := os.ReadFile(p); string(b) != bad {
		t.Fatal("file changed")
	}
	os.WriteFile(p, []byte(`[1]`), 0o644)
	if _, err := Install(p, "ralph hook stop"); err == nil || !strings.Contains(err.Error(), ":1:1: ") {
		t.Fatalf("err = %v", err)
	}
}

func TestUninstallMissingFileAndEmptyStructure(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "hooks.json")
	if res, err := Uninstall(p, "ralph hook stop"); err != nil || res.Action != "absent" {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := os.Stat(p); err == nil {
		t.Fatal("uninstall created a file")
	}
	Install(p, "ralph hook stop")
	Uninstall(p, "ralph hook stop")
	if b, _ := os.ReadFile(p); string(b) != "{}\n" {
		t.Fatalf("got %q", b)
	}
}

func TestIsRalphCommand(t *testing.T) {
	for cmd, want := range map[string]bool{
		"ralph hook stop":                   true,
		"/opt/x/ralph hook stop":            true,
		"'/my dir/ralph' hook stop":         true,
		"ralph hook stop --verbose":         false,
		"other hook stop":                   false,
		"notify-send done":                  false,
		"/tmp/go-build/main.test hook stop": false,
	} {
		if got := isRalphCommand(cmd, ""); got != want {
			t.Errorf("IsRalphCommand(%q) = %v", cmd, got)
		}
	}
	if !isRalphCommand("/tmp/go-build/main.test hook stop", "/tmp/go-build/main.test hook stop") {
		t.Error("own command not recognised")
	}
}

func TestSettingsPath(t *testing.T) {
	t.Setenv("CODEX_HOME", "")
	cases := map[[2]string]string{
		{Claude, ScopeProject}: "/r/.claude/settings.json",
		{Claude, ScopeUser}:    "/h/.claude/settings.json",
		{Codex, ScopeProject}:  "/r/.codex/hooks.json",
		{Codex, ScopeUser}:     "/h/.codex/hooks.json",
	}
	for k, want := range cases {
		if got, err := SettingsPath(k[0], k[1], "/r", "/h"); err != nil || got != want {
			t.Errorf("%v: %q %v", k, got, err)
		}
	}
	t.Setenv("CODEX_HOME", "/ch")
	if got, _ := SettingsPath(Codex, ScopeUser, "/r", "/h"); got != "/ch/hooks.json" {
		t.Errorf("CODEX_HOME ignored: %s", got)
	}
	if _, err := SettingsPath(Claude, "team", "/r", "/h"); err == nil {
		t.Error("bad scope accepted")
	}
}

func TestPluginFiles(t *testing.T) {
	dir := t.TempDir()
	w, u, err := WritePlugin(dir, "/opt/ralph", "1.2.3")
	if err != nil || len(w) != 3 || len(u) != 0 {
		t.Fatalf("%v %v %v", w, u, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "commands", "ralph-loop.md"))
	if !strings.Contains(string(b), "!`/opt/ralph loop start $ARGUMENTS`") || !strings.HasPrefix(string(b), "---\ndescription:") {
		t.Fatalf("command:\n%s", b)
	}
	b, _ = os.ReadFile(filepath.Join(dir, ".claude-plugin", "plugin.json"))
	if !strings.Contains(string(b), `"version": "1.2.3"`) {
		t.Fatalf("manifest:\n%s", b)
	}
	w, u, _ = WritePlugin(dir, "/opt/ralph", "1.2.3")
	if len(w) != 0 || len(u) != 3 {
		t.Fatalf("rewrite: %v %v", w, u)
	}
}

// TestInstallCodexMCP: the table Codex reads back holds the argv exactly
// (quotes, backslashes and all), the user's other lines and comments stay
// byte for byte, and a second install changes nothing.
func TestInstallCodexMCP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	orig := "# mine\nmodel = \"o3\"\n\n[mcp_servers.ralph]\ncommand = \"old\"\n\n[profiles.fast] # fast\nmodel = \"o4-mini\"\n"
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := []string{`/opt/it's "ralph"`, "mcp", `C:\dir`, "two\nlines"}
	if res, err := InstallMCP(Codex, path, argv); err != nil || !res.Changed {
		t.Fatalf("install: %+v %v", res, err)
	}
	b, _ := os.ReadFile(path)
	var doc struct {
		Model   string `toml:"model"`
		Servers map[string]struct {
			Command string   `toml:"command"`
			Args    []string `toml:"args"`
		} `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v in\n%s", err, b)
	}
	got := doc.Servers[mcpServerName]
	if doc.Model != "o3" || got.Command != argv[0] || !slices.Equal(got.Args, argv[1:]) {
		t.Fatalf("read back %+v from\n%s", doc, b)
	}
	for _, keep := range []string{"# mine\nmodel = \"o3\"\n\n[mcp_servers.ralph]\n", "\n[profiles.fast] # fast\nmodel = \"o4-mini\"\n"} {
		if !strings.Contains(string(b), keep) {
			t.Fatalf("lost %q:\n%s", keep, b)
		}
	}
	if res, err := InstallMCP(Codex, path, argv); err != nil || res.Changed {
		t.Fatalf("second install: %+v %v", res, err)
	}
}
