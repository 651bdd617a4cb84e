package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
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
		{"exporter", "--listen", "127.0.0.1:0", "--verify-every", "0.5s"},
		{"exporter", "--listen", "127.0.0.1:0", "--verify-every", "garbage"},
		{"exporter", "--listen", "127.0.0.1:0", "--budget", "99999999999h"}, // beyond time.Duration
		{"exporter", "--listen", "127.0.0.1:0", "--budget", "NaN"},
		{"exporter", "--listen", "127.0.0.1:0", "--budget", "99ms"},
		{"exporter", "--listen", "127.0.0.1:0", "--budget", "2m1s"},
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
	stuckTools := func() int {
		var tools int
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(DISTINCT tool) FROM opsdesk.operations
WHERE state = 'pending' AND lease_expires_at <= now()`).Scan(&tools))
		return tools
	}
	// A retry the fleet had in flight may take a stuck record over as it
	// stops: the fleet runs again until two tools' records stay stuck once
	// it has stopped.
	for seed := uint64(12); ; seed++ {
		fleet, err := demo.StartFleet(t.Context(), demo.FleetConfig{
			Pool: d.Service, ProviderURL: provider.URL(), Workers: 4, Rate: 25, Seed: seed,
			Lease: lease, CallTimeout: 500 * time.Millisecond, SlowCall: 2 * lease,
		})
		require.NoError(t, err)
		t.Cleanup(fleet.Stop) // Stop runs once
		waitFor(t, 2*time.Minute, "stuck records of two tools", func() bool { return stuckTools() >= 2 })
		fleet.Stop()
		// Every lease the stopped fleet left runs out: the stuck records stay put.
		time.Sleep(2 * lease)
		if stuckTools() >= 2 {
			break
		}
		require.Less(t, seed, uint64(20), "two tools' stuck records never outlasted the fleet")
	}

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

// TestExporterRefusesHostileRequests sends the exporter's server what a
// stranger on its port might: dot segments, NUL, a 1 MiB path or header,
// methods other than GET, scrape-timeout headers that are no timeout.
// Each gets a clear 3xx or 4xx, or is ignored; none a 500, a hang or a
// scrape of a path that is not /metrics; and the exporter serves on.
func TestExporterRefusesHostileRequests(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	url := startExporterCmd(t, "--dsn", dbtest.NewPerson(t, d, "viewer", "*").DSN)
	base := strings.TrimSuffix(url, "/metrics")
	client := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	do := func(method, path string, header http.Header) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, nil)
		require.NoError(t, err)
		maps.Copy(req.Header, header)
		resp, err := client.Do(req)
		require.NoError(t, err, "%s %.40s", method, path)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}
	huge := strings.Repeat("a", 1<<20)
	for _, c := range []struct {
		method, path string
		header       http.Header
		code         int
	}{
		{http.MethodGet, "/metrics/../healthz", nil, http.StatusTemporaryRedirect},
		{http.MethodGet, "/healthz/../metrics", nil, http.StatusTemporaryRedirect},
		{http.MethodGet, "/./metrics", nil, http.StatusTemporaryRedirect},
		{http.MethodGet, "/%00", nil, http.StatusNotFound},
		{http.MethodGet, "/metrics%00", nil, http.StatusNotFound},
		{http.MethodGet, "/metrics%2F..%2Fhealthz", nil, http.StatusNotFound},
		{http.MethodGet, "/" + huge, nil, http.StatusRequestHeaderFieldsTooLarge},
		{http.MethodGet, "/metrics", http.Header{"X-Junk": {huge}}, http.StatusRequestHeaderFieldsTooLarge},
		{http.MethodPost, "/metrics", nil, http.StatusMethodNotAllowed},
		{http.MethodPut, "/healthz", nil, http.StatusMethodNotAllowed},
		{http.MethodDelete, "/metrics", nil, http.StatusMethodNotAllowed},
		{"PROPFIND", "/", nil, http.StatusMethodNotAllowed},
	} {
		resp, body := do(c.method, c.path, c.header)
		require.Equal(t, c.code, resp.StatusCode, "%s %.40s: %.200s", c.method, c.path, body)
		require.NotContains(t, body, "opsdesk_store_up", "%s %.40s: no scrape", c.method, c.path)
		if c.code == http.StatusTemporaryRedirect {
			require.NotContains(t, []string{"", c.path}, resp.Header.Get("Location"), "to the cleaned path")
		}
	}
	// A scrape timeout that is no positive number of seconds, or one
	// longer than the budget, leaves the budget as it is: a whole scrape.
	for _, timeout := range []string{"-1", "-0", "0", "NaN", "-Inf", "+Inf", "1e400", "1e-400", "99999999999999999999",
		"ten", "1s", " 2", "0x10", "", "\t", huge[:1000]} {
		resp, body := do(http.MethodGet, "/metrics", http.Header{"X-Prometheus-Scrape-Timeout-Seconds": {timeout}})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%q: %.200s", timeout, body)
		require.Contains(t, body, "opsdesk_store_up 1\n", "%.40q", timeout)
		require.Contains(t, body, "opsdesk_scrape_partial 0\n", "%.40q", timeout)
	}
	// A NUL in a header, which net/http's client will not send.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: exporter\r\nX-Prometheus-Scrape-Timeout-Seconds: 5\x00\r\n\r\n")
	require.NoError(t, err)
	status, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 400 Bad Request\r\n", status)
	// The exporter serves on.
	require.Equal(t, 1.0, scrapeURL(t, url)["opsdesk_store_up"][""])
}
