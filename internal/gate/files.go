package gate

import (
	"path"
	"slices"
	"strings"
)

// toolConfig are the files a gate's program reads as its own
// configuration: changing one changes what the gate checks.
var toolConfig = map[string][]string{
	"make":          {"Makefile", "makefile", "GNUmakefile"},
	"npm":           {"package.json"},
	"npx":           {"package.json"},
	"pnpm":          {"package.json"},
	"yarn":          {"package.json"},
	"bun":           {"package.json"},
	"eslint":        {".eslintrc", ".eslintrc.js", ".eslintrc.cjs", ".eslintrc.json", ".eslintrc.yml", ".eslintrc.yaml", "eslint.config.js", "eslint.config.mjs", "eslint.config.cjs"},
	"tsc":           {"tsconfig.json"},
	"jest":          {"jest.config.js", "jest.config.ts", "jest.config.mjs", "jest.config.cjs"},
	"vitest":        {"vitest.config.ts", "vitest.config.js", "vitest.config.mjs"},
	"pytest":        {"pytest.ini", "conftest.py", "tox.ini", "setup.cfg"},
	"ruff":          {"ruff.toml", ".ruff.toml"},
	"mypy":          {"mypy.ini", ".mypy.ini"},
	"golangci-lint": {".golangci.yml", ".golangci.yaml", ".golangci.toml", ".golangci.json"},
}

// PackageJSON is the file whose "scripts" the package managers run.
const PackageJSON = "package.json"

// interpreters run the script named by their first argument that is not
// an option.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "source": true, ".": true,
	"python": true, "python3": true, "node": true, "ruby": true, "perl": true, "php": true, "deno": true, "tsx": true, "ts-node": true,
}

// Files lists the repository-relative paths a set of gate commands runs
// or is configured by — never the files a gate merely reads, which are the
// work it checks: each simple command's program when it is a path
// (./scripts/test), the script an interpreter runs (bash check.sh,
// python3 tests/run.py; sh -c '…' is read as a command in turn), and the
// configuration files of the tools named (make → Makefile, npm → the
// package.json scripts, eslint → its config; python -m pytest, npx jest).
// Which of them exist is for the caller to find out; paths outside the
// repository are left out.
func Files(commands []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if p, ok := repoPath(p); ok && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	var walk func(cmd string, depth int)
	walk = func(cmd string, depth int) {
		for _, words := range simpleCommands(cmd) {
			words = dropPrefixes(words)
			if len(words) == 0 {
				continue
			}
			prog := words[0]
			tool := path.Base(prog)
			if strings.Contains(prog, "/") {
				add(prog)
			}
			for _, f := range toolConfig[tool] {
				add(f)
			}
			args := words[1:]
			for i := 0; i < len(args); i++ {
				w := args[i]
				switch {
				case w == "-m" && i+1 < len(args): // python -m MODULE
					for _, f := range toolConfig[args[i+1]] {
						add(f)
					}
					i = len(args)
				case tool == "npx" && !strings.HasPrefix(w, "-"): // npx TOOL
					for _, f := range toolConfig[path.Base(w)] {
						add(f)
					}
					i = len(args)
				case interpreters[tool] && w == "-c" && i+1 < len(args):
					if depth < 3 {
						walk(args[i+1], depth+1)
					}
					i = len(args)
				case interpreters[tool] && !strings.HasPrefix(w, "-"):
					add(w)
					i = len(args)
				}
			}
		}
	}
	for _, c := range commands {
		walk(c, 0)
	}
	slices.Sort(out)
	return out
}

// dropPrefixes removes what stands before a command's program: "!",
// environment assignments, and wrappers that run the rest as a command.
func dropPrefixes(words []string) []string {
	for len(words) > 0 {
		w := words[0]
		switch {
		case w == "!" || w == "exec" || w == "time" || w == "env" || w == "command" || w == "nice":
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "="):
		default:
			return words
		}
		words = words[1:]
	}
	return words
}

// simpleCommands splits a shell command line into simple commands (at ;
// & | and newlines outside quotes) and those into words, with quotes
// removed: enough to find what each one runs.
func simpleCommands(s string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '\\' && i+1 < len(s):
			w.WriteByte(s[i+1])
			inWord = true
			i++
		case c == ';' || c == '&' || c == '|' || c == '\n' || c == '(' || c == ')' || c == '`':
			endCmd()
		case c == ' ' || c == '\t' || c == '<' || c == '>':
			endWord()
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

// repoPath reads a word as a path inside the repository, if it can be one.
func repoPath(w string) (string, bool) {
	if w == "" || strings.HasPrefix(w, "-") || strings.HasPrefix(w, "/") || strings.HasPrefix(w, "~") || strings.HasPrefix(w, "$") ||
		strings.ContainsAny(w, "*?[{") || strings.Contains(w, "...") {
		return "", false
	}
	p := path.Clean(w)
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	return p, true
}

// shellWords are the shell's own builtins and keywords: no program to
// find.
var shellWords = map[string]bool{
	"cd": true, "test": true, "[": true, "[[": true, "true": true, "false": true, "echo": true, "printf": true, "exit": true,
	"export": true, "set": true, "unset": true, ":": true, ".": true, "source": true, "if": true, "then": true, "else": true,
	"elif": true, "fi": true, "for": true, "while": true, "until": true, "do": true, "done": true, "case": true, "esac": true,
	"{": true, "}": true, "(": true, ")": true, "read": true, "shift": true, "return": true, "wait": true, "trap": true, "eval": true,
}

// Programs lists the programs a set of gate commands starts (each simple
// command's first word after assignments and wrappers), without the
// shell's builtins and keywords, once each in first-seen order: what the
// preflight looks for on $PATH or in the repository.
func Programs(commands []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range commands {
		for _, words := range simpleCommands(c) {
			words = dropPrefixes(words)
			if len(words) == 0 {
				continue
			}
			p := strings.TrimLeft(words[0], "(")
			if p == "" || shellWords[p] || seen[p] || strings.ContainsAny(p, "$`") {
				continue
			}
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
