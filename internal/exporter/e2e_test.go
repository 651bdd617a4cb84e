package exporter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// hostileTool is a tool name that tries to break out of its label.
const hostileTool = "charge\"card\\\n} opsdesk_store_up 0"

// TestPrometheusScrapesTheExporter starts a real Prometheus server that
// scrapes the exporter every second, against a store with stuck records,
// and asks Prometheus's HTTP API for the stuck count and the oldest stuck
// age. A missing prometheus binary fails the test: .ci/run installs it.
func TestPrometheusScrapesTheExporter(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("prometheus")
	require.NoError(t, err, "the end-to-end test needs the Prometheus server on PATH (Debian: apt-get install prometheus)")

	seeded := time.Now() // the fixtures' clock reads this or later
	d := fixtureDB(t)
	_, err = d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
VALUES ('acme', $1, 'h1', '1', sha256('h1'), 'local', 'pending', 'w', now() - interval '2h', now() - interval '1h')`, hostileTool)
	require.NoError(t, err)
	e := newExporter(dbtest.NewPerson(t, d, "viewer", "*").Pool, Config{Logf: t.Logf})
	target := httptest.NewServer(e.Handler()) // on 127.0.0.1
	t.Cleanup(target.Close)

	api := startPrometheus(t, bin, target.Listener.Addr().String())
	var stuck, oldest float64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		stuck = queryOne(t, api, `opsdesk_operations{job="opsdesk",state="stuck",tool="charge-card"}`)
		oldest = queryOne(t, api, `opsdesk_oldest_stuck_seconds{job="opsdesk",tool="charge-card"}`)
		if stuck == 5 && oldest > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "Prometheus has not scraped the exporter in a minute: stuck %v, oldest %v", stuck, oldest)
	}
	// d3's lease expired 3h before the fixtures were seeded; the sample
	// was scraped between then and now.
	require.GreaterOrEqual(t, oldest, float64(threeHours))
	require.LessOrEqual(t, oldest, float64(threeHours)+time.Since(seeded).Seconds()+1)
	require.Equal(t, 1.0, queryOne(t, api, `opsdesk_store_up{job="opsdesk"}`))
	require.Equal(t, 1.0, queryOne(t, api, `up{job="opsdesk"}`), "Prometheus took every scrape")
	// The hostile name reached Prometheus as one label value, unchanged.
	require.Equal(t, 1.0, queryOne(t, api, fmt.Sprintf(`opsdesk_operations{state="stuck",tool=%s}`, strconv.Quote(hostileTool))))
}

// startPrometheus runs prometheus, scraping target every second, with
// its storage in a temporary directory, until the test ends; it returns
// the URL of its HTTP API.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: opsdesk
    static_configs:
      - targets: [%q]
`, target), 0o600))
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus said:\n%s", logs.String())
		}
	})
	return "http://" + addr
}

// freeAddr is a 127.0.0.1 address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// queryOne asks Prometheus for an instant vector of at most one sample
// and returns its value (0: none yet, or Prometheus is not up yet).
func queryOne(t *testing.T, api, query string) float64 {
	t.Helper()
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0 // still starting
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		return 0 // listening, not ready yet: it answers "Service Unavailable" in plain text
	}
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.Equal(t, "success", answer.Status, "%s: %s", query, answer.Error)
	require.LessOrEqual(t, len(answer.Data.Result), 1, "%s: %v", query, answer.Data.Result)
	if len(answer.Data.Result) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(answer.Data.Result[0].Value[1].(string), 64)
	require.NoError(t, err)
	return v
}

// lockedBuffer is a buffer a child process and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
