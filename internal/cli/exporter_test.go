package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
)

func TestExporterUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"exporter"},
		{"exporter", "--listen", "127.0.0.1:0", "--budget", "0s"},
		{"exporter", "--listen", "127.0.0.1:0", "--budget", "-1s"},
		{"exporter", "--listen", "127.0.0.1:0", "--budget", "1h"},
		{"exporter", "--listen", "127.0.0.1:0", "--verify-every", "5s"},
		{"exporter", "--listen", "127.0.0.1:0", "--verify-every", "-1h"},
		{"exporter", "--listen", "127.0.0.1:0", "extra"},
		{"exporter", "--listen", "127.0.0.1:0", "--dsn", " \t\n"},
	} {
		code, _, errOut := run(args...)
		require.Equal(t, ExitUsage, code, "%q: %s", args, errOut)
	}
	// An address nobody can listen on is the caller's to fix.
	d := dbtest.New(t)
	code, _, errOut := run("exporter", "--listen", "256.0.0.1:1", "--dsn", dbtest.NewPerson(t, d, "viewer", "*").DSN)
	require.Equal(t, ExitUsage, code, errOut)
	require.Contains(t, errOut, "--listen 256.0.0.1:1")
}

// startExporterCmd runs `opsdesk exporter --listen 127.0.0.1:0 args…`
// until the test ends and returns its metrics URL.
func startExporterCmd(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	root := newRootCmd(&out, &errOut)
	root.SetArgs(append([]string{"exporter", "--listen", "127.0.0.1:0"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done, errOut.String())
	})
	serving := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+/metrics)`)
	waitFor(t, 30*time.Second, "the exporter serves", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the exporter stopped: %v\n%s", err, errOut.String())
		default:
		}
		return serving.MatchString(out.String())
	})
	return serving.FindStringSubmatch(out.String())[1]
}

// scrapeURL gets a metrics URL and parses the exposition.
func scrapeURL(t *testing.T, url string) map[string]map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	out := map[string]map[string]float64{}
	for name, f := range fams {
		out[name] = map[string]float64{}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			slices.Sort(labels)
			out[name][strings.Join(labels, ",")] = v
		}
	}
	return out
}

// TestExporterAgreesWithOpsList runs the demo's fleet until records are
// stuck, stops it and lets every lease expire, then compares the exporter
// command's stuck counts and oldest stuck ages, tool by tool, with what
// `opsdesk ops list --state stuck` says, both as the same viewer.
func TestExporterAgreesWithOpsList(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), demo.Schema)
	require.NoError(t, err)
	provider, err := demo.StartProvider(demo.ProviderConfig{Pool: dbtest.New(t).Service})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, provider.Close()) })
	const lease = time.Second
	fleet, err := demo.StartFleet(t.Context(), demo.FleetConfig{
		Pool: d.Service, ProviderURL: provider.URL(), Workers: 4, Rate: 25, Seed: 12,
		Lease: lease, CallTimeout: 500 * time.Millisecond, SlowCall: 2 * lease,
	})
	require.NoError(t, err)
	t.Cleanup(fleet.Stop)
	waitFor(t, 2*time.Minute, "stuck records of two tools", func() bool {
		var tools int
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(DISTINCT tool) FROM opsdesk.operations
WHERE state = 'pending' AND lease_expires_at <= now()`).Scan(&tools))
		return tools >= 2
	})
	fleet.Stop()
	// Every lease the stopped fleet left runs out: the stuck records stay put.
	time.Sleep(2 * lease)

	viewer := dbtest.NewPerson(t, d, "viewer", "*")
	url := startExporterCmd(t, "--dsn", viewer.DSN)
	m := scrapeURL(t, url)
	scraped := time.Now()

	code, out, errOut := run("ops", "list", "--state", "stuck", "--limit", "1000", "-o", "json", "--dsn", viewer.DSN)
	require.Equal(t, ExitOK, code, errOut)
	var items []listItem
	require.NoError(t, json.Unmarshal([]byte(out), &items))
	listed := map[string]float64{}
	oldest := map[string]float64{} // seconds since the lease expired
	for _, it := range items {
		listed[it.Tool]++
		oldest[it.Tool] = max(oldest[it.Tool], -*it.LeaseExpiresInSeconds)
	}
	require.GreaterOrEqual(t, len(listed), 2)
	exported := map[string]float64{}
	for labels, n := range m["opsdesk_operations"] {
		if tool, ok := strings.CutPrefix(labels, "state=stuck,tool="); ok && n > 0 {
			exported[tool] = n
		}
	}
	require.Equal(t, listed, exported, "stuck records by tool")
	listedAt := time.Since(scraped).Seconds()
	for tool, age := range oldest {
		require.InDelta(t, age, m["opsdesk_oldest_stuck_seconds"]["tool="+tool], listedAt+1, tool)
	}
	require.Equal(t, 1.0, m["opsdesk_store_up"][""])
}
