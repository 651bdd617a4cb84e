// Package alertrules tests the Prometheus alert rules shipped in
// deploy/prometheus: promtool checks and unit-tests them, and every
// command an alert points at must be one the console (opsdesk --goto) or
// the CLI (opsdesk doctor) accepts. It holds tests only.
package alertrules

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/opsdesk/opsdesk/internal/cli"
	"github.com/opsdesk/opsdesk/ui"
)

// The rule files, relative to this package.
const (
	dir        = "../../deploy/prometheus"
	rulesFile  = "opsdesk-rules.yml"
	thresholds = "opsdesk-stuck-thresholds.yml"
	testsFile  = "opsdesk-rules.test.yml"
)

// annotations every alert carries, and the severities it may have.
var (
	annotations = []string{"action", "command", "description", "summary"}
	severities  = []string{"critical", "warning"}
)

// ruleFile is what the tests read of a rule file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// testFile is what the tests read of promtool's unit test file.
type testFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, v), name)
}

// promtool is the path of Prometheus' promtool. Its absence fails the
// tests: the rules would otherwise ship unchecked.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed, so the alert rules cannot be tested: install Prometheus "+
			"(Debian: apt-get install prometheus; .ci/run does): %v", err)
	}
	return path
}

// runPromtool runs promtool in dir and returns its output and error.
func runPromtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPromtool: the rule files are valid and pass their unit tests.
func TestPromtool(t *testing.T) {
	t.Parallel()
	out, err := runPromtool(t, dir, "check", "rules", rulesFile, thresholds)
	require.NoError(t, err, "promtool check rules:\n%s", out)
	out, err = runPromtool(t, dir, "test", "rules", testsFile)
	require.NoError(t, err, "promtool test rules:\n%s", out)
	require.Contains(t, out, "SUCCESS")
}

// TestPromtoolCatchesABrokenRule: the unit tests fail when a rule changes
// (the stuck alert's default threshold, 15m to 2h30m), so they test the
// rules rather than pass whatever they say.
func TestPromtoolCatchesABrokenRule(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	for _, name := range []string{rulesFile, thresholds, testsFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		if name == rulesFile {
			require.Equal(t, 1, bytes.Count(b, []byte("opsdesk_oldest_stuck_seconds > 900")))
			b = bytes.Replace(b, []byte("opsdesk_oldest_stuck_seconds > 900"), []byte("opsdesk_oldest_stuck_seconds > 9000"), 1)
		}
		require.NoError(t, os.WriteFile(filepath.Join(tmp, name), b, 0o600))
	}
	out, err := runPromtool(t, tmp, "check", "rules", rulesFile)
	require.NoError(t, err, "the changed rule is still valid:\n%s", out)
	out, err = runPromtool(t, tmp, "test", "rules", testsFile)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "promtool test rules passed a changed rule:\n%s", out)
	require.Contains(t, out, "alertname: OpsdeskStuckOperations")
}

// TestEveryAlertIsComplete: each alert has a severity and the four
// annotations, and its unit tests include a case where it fires (with
// the rendered command) and one where it must not.
func TestEveryAlertIsComplete(t *testing.T) {
	t.Parallel()
	var rules ruleFile
	readYAML(t, rulesFile, &rules)
	var tests testFile
	readYAML(t, testsFile, &tests)
	require.ElementsMatch(t, []string{rulesFile, thresholds}, tests.RuleFiles)

	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) == 0 {
				quiet[at.Alertname] = true
			}
			for _, a := range at.ExpAlerts {
				if a.ExpAnnotations["command"] != "" {
					fires[at.Alertname] = true
				}
			}
		}
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			require.Contains(t, severities, r.Labels["severity"], "%s: severity", r.Alert)
			keys := make([]string, 0, len(r.Annotations))
			for k := range r.Annotations {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			require.Equal(t, annotations, keys, "%s: annotations", r.Alert)
			require.True(t, strings.HasPrefix(r.Annotations["command"], "opsdesk "), "%s: command %q", r.Alert, r.Annotations["command"])
			require.True(t, fires[r.Alert], "%s: no unit test where it fires", r.Alert)
			require.True(t, quiet[r.Alert], "%s: no unit test where it must not fire", r.Alert)
		}
	}
	require.Len(t, alerts, 15)
	for name := range fires {
		require.Contains(t, alerts, name, "the tests expect an alert the rules do not have")
	}
}

// shellRunner runs a command line as sh does, with a stand-in opsdesk
// that prints the arguments the shell gave it, and returns those.
func shellRunner(t *testing.T) func(line string) ([]string, error) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "opsdesk"), []byte("#!/bin/sh\nfor a; do printf '%s\\0' \"$a\"; done\n"), 0o700))
	return func(line string) ([]string, error) {
		cmd := exec.CommandContext(t.Context(), sh, "-c", line)
		cmd.Env = []string{"PATH=" + bin}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %s", line, err, stderr.String())
		}
		return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"), nil
	}
}

// consoleTarget checks a command an alert points at: the shell must read
// it as opsdesk --goto COMMAND, the console must accept COMMAND, and it
// must lead to the alert's tool and tenant (labels). It returns where it
// leads. A command that is not --goto must be one of opsdesk's commands
// (cliTarget).
func consoleTarget(shell func(string) ([]string, error), line string, labels map[string]string) (string, error) {
	args, err := shell(line)
	if err != nil {
		return "", err
	}
	if len(args) > 0 && args[0] != "--goto" {
		return cliTarget(args)
	}
	if len(args) != 2 || args[0] != "--goto" {
		return "", fmt.Errorf("%s: the shell reads opsdesk %q, not opsdesk --goto COMMAND", line, args)
	}
	where, err := ui.CheckCommand(args[1])
	if err != nil {
		return "", fmt.Errorf("the console refuses %q: %w", args[1], err)
	}
	for _, label := range []string{"tool", "tenant"} {
		if v := labels[label]; v != "" && !strings.Contains(where, v) {
			return "", fmt.Errorf("%q leads to %s, not to %s %q", args[1], where, label, v)
		}
	}
	return where, nil
}

// cliTarget checks that args name one of opsdesk's commands, by its
// help: opsdesk ARGS --help must succeed and show ARGS's usage, not the
// root's. It returns the command's usage line.
func cliTarget(args []string) (string, error) {
	var out, errOut bytes.Buffer
	if code := cli.Main(append(slices.Clone(args), "--help"), &out, &errOut); code != cli.ExitOK {
		return "", fmt.Errorf("opsdesk %q --help exits %d: %s", args, code, errOut.String())
	}
	usage := "opsdesk " + strings.Join(args, " ")
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), usage+" ") {
			return strings.TrimSpace(line), nil
		}
	}
	return "", fmt.Errorf("opsdesk %q is not a command of opsdesk: its help shows no usage %q", args, usage)
}

// TestCommandsOpenTheConsole: every command the unit tests expect an alert
// to render (promtool checks the rendering) opens the console on the
// alert's records.
func TestCommandsOpenTheConsole(t *testing.T) {
	t.Parallel()
	shell := shellRunner(t)
	var tests testFile
	readYAML(t, testsFile, &tests)
	n := 0
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			for _, a := range at.ExpAlerts {
				_, err := consoleTarget(shell, a.ExpAnnotations["command"], a.ExpLabels)
				require.NoError(t, err, at.Alertname)
				n++
			}
		}
	}
	require.GreaterOrEqual(t, n, 13)
}

// TestConsoleTargetRefuses: the check above fails on a command the
// console refuses, one the shell misreads, and one aimed elsewhere, so it
// cannot pass a broken alert.
func TestConsoleTargetRefuses(t *testing.T) {
	t.Parallel()
	shell := shellRunner(t)
	tool := map[string]string{"tool": "it's a tool"}
	for line, want := range map[string]string{
		`opsdesk --goto 'stuk tool:"x"'`:              `unknown command "stuk"`,
		`opsdesk --goto 'deferred tool:"x"'`:          `unknown command "deferred"`,
		`opsdesk --goto 'stuck tool:"it's a tool"'`:   "sh:",
		`opsdesk --goto stuck tool:x`:                 "not opsdesk --goto COMMAND",
		`opsdesk --goto 'stuck tool:"its a tool"'`:    `not to tool "it's a tool"`,
		`opsdesk --goto 'stuck tool:"it'\''s a tool'`: "unterminated quote",
		`opsdesk doctr`:                               "not a command of opsdesk",
		`opsdesk doctor --no-such-flag`:               "exits 2",
	} {
		_, err := consoleTarget(shell, line, tool)
		require.ErrorContains(t, err, want, line)
	}
	where, err := consoleTarget(shell, `opsdesk --goto 'stuck tool:"it'\''s a tool"'`, tool)
	require.NoError(t, err)
	require.Equal(t, `operations list: state:stuck tool:"it's a tool"`, where)
	where, err = consoleTarget(shell, `opsdesk doctor`, nil)
	require.NoError(t, err)
	require.Equal(t, "opsdesk doctor [flags]", where)
}
