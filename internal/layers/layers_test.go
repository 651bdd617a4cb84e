package layers

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/opsdesk/opsdesk/"

// pkg is a package of the module: what it depends on, directly or not,
// without its tests (go list -deps), and what it imports itself; the
// module's packages by their paths in it, other modules' by their import
// paths, the standard library's left out.
type pkg struct{ deps, imports []string }

// packages is every package of the module, from one go list.
func packages(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Deps " "}}|{{join .Imports " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderrOf(err))
	pkgs := map[string]pkg{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "|")
		require.Len(t, parts, 3, sc.Text())
		pkgs[strings.TrimPrefix(parts[0], module)] = pkg{deps: notStd(parts[1]), imports: notStd(parts[2])}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, pkgs)
	return pkgs
}

// notStd is the space-separated import paths that are not the standard
// library's, the module's trimmed to their paths in it.
func notStd(paths string) []string {
	var out []string
	for _, d := range strings.Fields(paths) {
		switch {
		case strings.HasPrefix(d, module):
			out = append(out, strings.TrimPrefix(d, module))
		case strings.Contains(strings.SplitN(d, "/", 2)[0], "."):
			out = append(out, d)
		}
	}
	return out
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// TestREADMEPackagesAreTheModules: the README's Packages table names each
// package once, and nothing that is not one (internal/outside, a module
// of its own, aside).
func TestREADMEPackagesAreTheModules(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	section := string(readme)
	start := strings.Index(section, "\n## Packages\n")
	require.GreaterOrEqual(t, start, 0, "README has no Packages section")
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9/]+)` \\|").FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	var want []string
	for p := range packages(t) {
		want = append(want, p)
	}
	want = append(want, "internal/outside")
	slices.Sort(listed)
	slices.Sort(want)
	require.Equal(t, want, listed, "the README's Packages table (left: go list ./..., right: the table)")
}

// rule: no package matching from (but except) depends on any matching
// not (but those matching but).
type rule struct {
	from, not, except, but []string // path prefixes ("ops" is ops and ops/...); "=x" is x alone
	why                    string
}

// pgxFree are the packages the console depends on, and the leaves the
// store's readers fill in: none of them may depend on the driver.
var pgxFree = []string{"ui", "=reconcile", "reconcile/bulk", "reconcile/auto", "ops/opsmodel", "internal/readmodel", "internal/auditreport",
	"internal/purgereport", "internal/audited", "internal/termtext", "internal/lookupurl"}

var rules = []rule{
	{from: []string{"ops"}, not: []string{"ui", "internal/cli", "config", "reconcile", "internal/storeview", "internal/retention",
		"internal/audit", "internal/exporter", "internal/demo", "github.com/spf13/"},
		why: "the library knows nothing of the console, people's decisions or configuration"},
	{from: []string{"reconcile"}, not: []string{"ui", "internal/cli", "config", "internal/demo", "internal/exporter", "github.com/spf13/"},
		why: "people's decisions know nothing of the console or its configuration"},
	{from: []string{"ui"}, not: []string{"internal/cli", "config", "internal/demo", "internal/exporter", "github.com/spf13/"},
		why: "the console reads through a Source and decides through a Decider: it is handed its configuration"},
	{from: []string{"internal/storeview", "internal/retention", "internal/audit", "internal/audited", "internal/exporter",
		"internal/readmodel", "internal/auditreport", "internal/purgereport", "internal/auditcall"},
		not: []string{"ui", "internal/cli", "github.com/charmbracelet/"}, why: "the store's readers and writers know nothing of the console"},
	{from: []string{"internal/audited", "internal/pgtime", "internal/lookupurl", "=internal/pgcluster", "internal/termtext", "ops/opsmodel"},
		not: []string{"ops", "reconcile", "internal/", "ui", "config"}, but: []string{"ops/opsmodel"},
		why: "leaves: they depend on no package of the module but the library's pgx-free vocabulary"},
	{from: pgxFree, not: []string{"github.com/jackc/pgx/", "github.com/jackc/pgerrcode", "github.com/pressly/goose/"},
		why: "the console and what it names need no database driver: the database is behind its interfaces"},
	{from: []string{""}, not: []string{"internal/dbtest", "internal/lookuptest"}, except: []string{"internal/pgcluster/testserver"},
		why: "test helpers are for tests (and make test's server) only"},
}

func matches(p string, prefixes []string) bool {
	for _, pre := range prefixes {
		if exact, ok := strings.CutPrefix(pre, "="); ok {
			if p == exact {
				return true
			}
			continue
		}
		if pre == "" || p == strings.TrimSuffix(pre, "/") || strings.HasPrefix(p, strings.TrimSuffix(pre, "/")+"/") ||
			(strings.HasSuffix(pre, "/") && strings.HasPrefix(p, pre)) {
			return true
		}
	}
	return false
}

// TestImportDirections: the directions the README's Packages section
// states hold for every dependency, direct or not; only internal/cli uses
// cobra, only config and internal/cli viper, and only cmd/opsdesk the
// commands.
func TestImportDirections(t *testing.T) {
	t.Parallel()
	for p, pk := range packages(t) {
		for _, r := range rules {
			if !matches(p, r.from) || matches(p, r.except) {
				continue
			}
			for _, d := range pk.deps {
				require.False(t, matches(d, r.not) && !matches(d, r.but), "%s depends on %s: %s", p, d, r.why)
			}
		}
		for _, d := range pk.imports {
			switch {
			case d == "github.com/spf13/cobra" || strings.HasPrefix(d, "github.com/spf13/cobra/"):
				require.Equal(t, "internal/cli", p, "%s imports cobra: commands live in internal/cli", p)
			case d == "github.com/spf13/viper":
				require.Contains(t, []string{"config", "internal/cli"}, p, "%s imports viper: configuration is config's", p)
			case d == "internal/cli":
				require.Equal(t, "cmd/opsdesk", p, "%s imports the commands", p)
			}
		}
	}
}

// TestRulesCanFail: a rule catches a dependency it names, and passes one
// it does not.
func TestRulesCanFail(t *testing.T) {
	t.Parallel()
	require.True(t, matches("ui", rules[0].not))
	require.True(t, matches("internal/storeview", rules[0].not))
	require.True(t, matches("github.com/spf13/viper", rules[0].not))
	require.False(t, matches("internal/pgtime", rules[0].not))
	require.False(t, matches("opsx", []string{"ops"}))
	require.True(t, matches("ops/idemhttp", []string{"ops"}))
	require.True(t, matches("internal/dbtest", rules[len(rules)-1].not))
	require.True(t, matches("github.com/jackc/pgx/v5/pgxpool", []string{"github.com/jackc/pgx/"}))
	require.True(t, matches("reconcile", pgxFree))
	require.False(t, matches("reconcile/desk", pgxFree), "the desk calls the database")
}
