package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

func TestDemo(t *testing.T) {
	t.Parallel()

	t.Run("UsageErrorsExitTwo", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"demo", "--rate", "0"},
			{"demo", "--rate", "1000"},
			{"demo", "--workers", "0"},
			{"demo", "--outage", "-1"},
			{"demo", "--outage", "10001"},
			{"demo", "extra"},
		} {
			code, _, _ := run(args...)
			require.Equal(t, ExitUsage, code, args)
		}
	})

	// cli.Main builds its own signal context, so the headless demo runs as
	// a real process that gets a real SIGINT.
	t.Run("HeadlessRunsUntilInterrupted", func(t *testing.T) {
		t.Parallel()
		bin := buildOpsdesk(t)
		cmd := exec.Command(bin, "demo", "--headless", "--rate", "10", "--seed", "7")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		var rest bytes.Buffer
		lines := make(chan string, 4)
		go func() {
			r := bufio.NewReader(stdout)
			for range 4 {
				line, err := r.ReadString('\n')
				if err != nil {
					break
				}
				lines <- strings.TrimSuffix(line, "\n")
			}
			close(lines)
			_, _ = io.Copy(&rest, r) // anything after the lines
			exited <- cmd.Wait()
		}()
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				_ = cmd.Process.Kill()
				<-exited
				t.Logf("opsdesk demo's standard error:\n%s", stderr.String())
			}
		})

		first, second := readLine(t, lines), readLine(t, lines)
		dsn, ok := strings.CutPrefix(first, "OPSDESK_DSN=")
		require.True(t, ok, "first line: %q", first)
		providerURL, ok := strings.CutPrefix(second, "PROVIDER_URL=")
		require.True(t, ok, "second line: %q", second)
		require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, providerURL)
		// The superuser's DSN named as such, and the operator's beside it.
		super, ok := strings.CutPrefix(readLine(t, lines), "OPSDESK_SUPERUSER_DSN=")
		require.True(t, ok)
		require.Equal(t, dsn, super)
		operatorDSN, ok := strings.CutPrefix(readLine(t, lines), "OPSDESK_OPERATOR_DSN=")
		require.True(t, ok)
		opCfg, err := pgx.ParseConfig(operatorDSN)
		require.NoError(t, err)
		require.Equal(t, demoOperator, opCfg.User)
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		clusterDir := u.Query().Get("host")
		require.DirExists(t, clusterDir)
		require.FileExists(t, filepath.Join(clusterDir, "opsdesk.yaml"), "the tool catalog sits next to the cluster")
		written, err := config.Load(config.Options{File: filepath.Join(clusterDir, "opsdesk.yaml")})
		require.NoError(t, err)
		writtenDSN, err := pgx.ParseConfig(written.Context.DSN)
		require.NoError(t, err)
		require.Equal(t, demoOperator, writtenDSN.User, "the catalog's context is the demo's operator")
		require.Equal(t, 1, strings.Count(written.Context.DSN, "user="), "the catalog's DSN names its user once: %s", written.Context.DSN)

		conn, err := pgx.Connect(t.Context(), dsn)
		require.NoError(t, err)
		var id struct{ tenant, tool, key, ref, intent string }
		var counts demo.Counts
		waitFor(t, 2*time.Minute, "records appear in the demo's store", func() bool {
			counts, err = demo.CountStates(t.Context(), conn)
			require.NoError(t, err)
			if counts.Succeeded == 0 || counts.Rejected == 0 {
				return false
			}
			err := conn.QueryRow(t.Context(), `
SELECT tenant, tool, key, result_ref, intent->>'intent' FROM opsdesk.operations
WHERE state = 'completed' AND outcome = 'succeeded' AND effect <> 'local' LIMIT 1`).Scan(&id.tenant, &id.tool, &id.key, &id.ref, &id.intent)
			if errors.Is(err, pgx.ErrNoRows) {
				return false
			}
			require.NoError(t, err)
			return true
		})
		t.Logf("records: %v", counts)

		// PROVIDER_URL is the provider the fleet calls: it knows the effect
		// by the provider key the fleet sent.
		providerKey := ops.Identity{Tenant: id.tenant, Tool: id.tool, Key: id.key}.ProviderKey()
		resp, err := http.Get(providerURL + "/lookup/" + id.tenant + "/" + id.tool + "/" + providerKey)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.JSONEq(t, `{"found":true,"ref":"`+id.ref+`"}`, string(body))
		require.NoError(t, conn.Close(t.Context()))

		// PROVIDER_URL answers by the Idempotency-Key draft: the fleet's
		// request with its key replays the provider's answer, the key with
		// another request is 422, and no key is 400, problems both.
		charge := func(key, payload string) (*http.Response, []byte) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, providerURL+"/v1/"+id.tool, strings.NewReader(payload))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(demo.TenantHeader, id.tenant)
			if key != "" {
				req.Header.Set(idemhttp.KeyHeader, key)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp, body
		}
		quoted, err := idemhttp.FormatKey(providerKey)
		require.NoError(t, err)
		resp, body = charge(quoted, id.intent)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, "true", resp.Header.Get(idemhttp.DefaultReplayHeader))
		require.JSONEq(t, `{"ref":"`+id.ref+`"}`, string(body))
		resp, body = charge(quoted, `{}`)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, string(body))
		require.Equal(t, idemhttp.ProblemContentType, resp.Header.Get("Content-Type"))
		require.Contains(t, string(body), idemhttp.TypeKeyReused)
		resp, body = charge("", `{}`)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
		require.Contains(t, string(body), idemhttp.TypeKeyMissing)

		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		select {
		case err = <-exited:
		case <-time.After(time.Minute):
			t.Fatal("opsdesk demo did not stop within a minute of SIGINT")
		}
		stopped = true
		require.NoError(t, err, "exit status 0; standard error:\n%s", stderr.String())
		require.Empty(t, rest.String(), "standard output holds the DSN and URL lines only")
		require.NoDirExists(t, clusterDir, "the cluster is removed")
		require.NotContains(t, stderr.String(), "misbehaved")
	})

	// The demo serves the exporter on a free port of 127.0.0.1, says
	// where, and stops it with everything else.
	t.Run("ServesMetricsUntilStopped", func(t *testing.T) {
		t.Parallel()
		d := startDemo(t, demoOptions{Rate: 20, Workers: 2, Seed: 4, SeedSet: true, summaryEvery: time.Hour})
		line := regexp.MustCompile(`(?m)^  exporter  (http://127\.0\.0\.1:\d+/metrics)  `)
		url := d.waitFor(t, "the exporter's address", line)[1]
		waitFor(t, time.Minute, "the exporter counts the fleet's records", func() bool {
			m := scrapeURL(t, url)
			return m["opsdesk_store_up"][""] == 1 && m["opsdesk_operations"]["state=completed,tool=create-ticket"] > 0
		})
		require.NoError(t, d.stop(), d.errOut.String())
		_, err := http.Get(url)
		require.Error(t, err, "the exporter stopped with the demo")
	})

	// The demo's reconciler decides the outage's stuck charges as its own
	// login, each audited as a machine's decision.
	t.Run("ReconcilerDecidesTheOutage", func(t *testing.T) {
		t.Parallel()
		d := startDemo(t, demoOptions{Rate: 5, Workers: 2, Seed: 5, SeedSet: true, Outage: 6, Reconciler: true, summaryEvery: time.Hour})
		dsn := d.waitFor(t, "the database line", regexp.MustCompile(`(?m)^  database  (\S+)$`))[1]
		d.waitFor(t, "the reconciler line", regexp.MustCompile(`(?m)^  reconciler as opsdesk_demo_reconciler, every 5s`))
		conn, err := pgx.Connect(t.Context(), dsn)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		waitFor(t, time.Minute, "the reconciler decides the stuck charges", func() bool {
			var decided, stuck int
			require.NoError(t, conn.QueryRow(t.Context(), `SELECT
    (SELECT count(*) FROM opsdesk.audit WHERE role = 'opsdesk_demo_reconciler' AND action LIKE 'decide:%'
        AND outcome = 'succeeded' AND details->>'reconciler' = 'true'),
    (SELECT count(*) FROM opsdesk.operations WHERE key LIKE 'outage-%' AND state = 'pending')`).Scan(&decided, &stuck))
			return decided >= 6 && stuck == 0
		})
		var others int
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit a JOIN opsdesk.operations o ON o.id = a.operation_id
WHERE a.role = 'opsdesk_demo_reconciler' AND o.tool <> 'charge-card'`).Scan(&others))
		require.Zero(t, others, "the reconciler decides charge-card only")
		require.NoError(t, d.stop(), d.errOut.String())
	})

	t.Run("KeepLeavesTheDataDirectory", func(t *testing.T) {
		t.Parallel()
		d := startDemo(t, demoOptions{Keep: true, Rate: 20, Workers: 2, Seed: 3, SeedSet: true,
			summaryEvery: 100 * time.Millisecond})
		out := &d.out
		kept := regexp.MustCompile(`kept the demo's data directory: (\S+)/data `)
		t.Cleanup(func() {
			// Also when the test failed half-way: the kept directory has
			// no owner mark, so nothing else would ever remove it.
			_ = d.stop()
			if m := kept.FindStringSubmatch(out.String()); m != nil {
				_ = os.RemoveAll(m[1])
			}
		})
		summary := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  live \d+  stuck \d+  succeeded [1-9]\d*  rejected \d+  released \d+  refused attempts \d+$`)
		d.waitFor(t, "a live summary with records", summary)
		require.NoError(t, d.stop(), d.errOut.String())

		m := kept.FindStringSubmatch(out.String())
		require.NotNil(t, m, out.String())
		dir := m[1]
		require.FileExists(t, filepath.Join(dir, "data", "PG_VERSION"))
		require.FileExists(t, filepath.Join(dir, "opsdesk.yaml"))
		require.NoFileExists(t, filepath.Join(dir, "data", "postmaster.pid"), "the server was shut down cleanly")
		require.NoFileExists(t, filepath.Join(dir, "owner.pid"), "a later cluster start does not sweep it")
		require.Contains(t, out.String(), "psql 'postgres://postgres@/opsdesk?host=")
		require.Contains(t, out.String(), "seed 3,")
		require.Contains(t, out.String(), "-D "+filepath.Join(dir, "data"))
	})
}

// TestDemoConsoleRole: the demo's console connects as a person, not as
// the superuser: its role may decide (an admin of every tenant), sees the
// records through row-level security, decides through the database's
// functions with the catalog's tools, and the audit trail names it.
// Creating the role again (a kept cluster) reuses it with a new password.
func TestDemoConsoleRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cluster.Stop()) })
	operatorDSN, err := prepareDemoDatabase(ctx, cluster)
	require.NoError(t, err)
	require.Contains(t, operatorDSN, "user="+demoOperator)
	require.Equal(t, 1, strings.Count(operatorDSN, "user="), operatorDSN)
	provider, stopProvider, err := startDemoProvider(ctx, cluster, 4)
	require.NoError(t, err)
	t.Cleanup(stopProvider)
	catalog := filepath.Join(t.TempDir(), "opsdesk.yaml")
	require.NoError(t, writeDemoCatalog(catalog, operatorDSN, provider.URL()))
	cfg, err := config.Load(config.Options{File: catalog})
	require.NoError(t, err)
	connCfg, err := pgx.ParseConfig(cfg.Context.DSN)
	require.NoError(t, err)
	require.Equal(t, demoOperator, connCfg.User, "the written config connects as the demo's operator, not the superuser")

	view, opts, pool, err := openDemoConsole(ctx, operatorDSN, catalog)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NotNil(t, opts.Purger, "the demo's operator may purge from the review")
	require.Contains(t, opts.Catalog, demo.ToolChargeCard)
	desk := opts.Decider.(*desk.Desk)
	caps, err := desk.Capabilities(ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.Capabilities{Role: demoOperator, Decide: true, Grant: true, Purge: true}, caps)
	require.NotEmpty(t, desk.Runbook(demo.ToolChargeCard), "the catalog's runbooks reach the console")
	require.NotNil(t, opts.Bulk, "the demo's console offers R on its lists")
	stuckCharges, err := readmodel.ParseFilter("state:stuck tool:charge-card")
	require.NoError(t, err)
	require.NoError(t, opts.Bulk.CheckFilter(stuckCharges), "R's desk has the catalog's lookups")

	admin, err := pgx.Connect(ctx, cluster.DSN(demoDatabase))
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	var id, version int64
	require.NoError(t, admin.QueryRow(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt,
    leased_at, lease_expires_at, created_at)
VALUES ('acme', 'charge-card', 'ord-1', '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'worker-1', 1,
    now() - interval '2m', now() - interval '1m', now() - interval '2m')
RETURNING id, version`).Scan(&id, &version))

	d, err := view.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "stuck", string(d.State))
	listed, err := opts.Bulk.List(ctx, stuckCharges)
	require.NoError(t, err)
	require.Len(t, listed, 1, "R lists the stuck charge as the operator")
	require.Equal(t, id, listed[0].ID)
	ans, ok := desk.Ask(ctx, d.Tenant, d.Tool, d.Key)
	require.True(t, ok, "charge-card has a lookup in the demo's catalog")
	require.Equal(t, reconcile.LookupNotFound, ans.Evidence.Lookup, ans.Evidence.Summary)
	res, err := desk.Decide(ctx, d.Tool, reconcile.DecideParams{OperationID: id, Decision: reconcile.NotExecuted,
		ExpectVersion: version, Reason: "the provider has no such charge", Evidence: ans.Evidence})
	require.NoError(t, err)
	require.Equal(t, "released", res.State)
	var role, displayName string
	require.NoError(t, admin.QueryRow(ctx, `SELECT role, display_name FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
		res.Tenant, res.Seq).Scan(&role, &displayName))
	require.Equal(t, demoOperator, role)
	require.Equal(t, "demo operator", displayName)

	// The commands on the written config are the operator's too.
	code, out, errOut := run("doctor", "--config", catalog)
	require.Equal(t, ExitOK, code, out+errOut)
	require.Contains(t, out, "✓ role         "+demoOperator+": admin:")
	require.NotContains(t, out, "superuser: everything", "the console's role is no superuser")
	for _, class := range storeview.PrivilegeClasses {
		require.NotContains(t, privilegedLine(out, class), demoOperator, "nor can it bypass the database")
	}
	require.NoError(t, admin.QueryRow(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt,
    leased_at, lease_expires_at, created_at)
VALUES ('acme', 'charge-card', 'ord-2', '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'worker-1', 1,
    now() - interval '2m', now() - interval '1m', now() - interval '2m')
RETURNING id`).Scan(&id))
	code, out, errOut = run("resolve", strconv.FormatInt(id, 10), "--as", "not-executed", "--reason", "not at the provider", "--config", catalog)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, errOut, "lookup: HTTP 404")
	require.Contains(t, out, "now released")
	require.NoError(t, admin.QueryRow(ctx, `SELECT role FROM opsdesk.audit WHERE operation_id = $1`, id).Scan(&role))
	require.Equal(t, demoOperator, role, "the decision is the operator's, not postgres'")

	password, err := createDemoOperator(ctx, admin)
	require.NoError(t, err, "the role is reused")
	_, _, pool2, err := openDemoConsole(ctx, cluster.DSN(demoDatabase)+" user="+demoOperator+" password="+password, catalog)
	require.NoError(t, err)
	pool2.Close()
}

// buildOpsdesk builds the opsdesk binary into the test's directory.
func buildOpsdesk(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "opsdesk")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/opsdesk/opsdesk/cmd/opsdesk").CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return bin
}

// waitFor polls cond, in the test's goroutine, until it holds or timeout
// passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v in vain for: %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case line, ok := <-lines:
		require.True(t, ok, "standard output ended early")
		return line
	case <-time.After(2 * time.Minute):
		t.Fatal("no line on standard output within 2 minutes")
		return ""
	}
}

// inProcessDemo is runDemo running in the test's process.
type inProcessDemo struct {
	out, errOut syncBuffer
	err         error
	finished    chan struct{}
	cancel      context.CancelFunc
}

// startDemo runs the demo with opts until stop, or the end of the test.
func startDemo(t *testing.T, opts demoOptions) *inProcessDemo {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &inProcessDemo{finished: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(d.finished)
		d.err = runDemo(ctx, opts, &d.out, &d.errOut)
	}()
	t.Cleanup(func() { _ = d.stop() })
	return d
}

// waitFor waits for re in the demo's standard output and returns its
// submatches; the demo must not end before.
func (d *inProcessDemo) waitFor(t *testing.T, what string, re *regexp.Regexp) []string {
	t.Helper()
	waitFor(t, 2*time.Minute, what, func() bool {
		select {
		case <-d.finished:
			t.Fatalf("the demo ended before it was interrupted: %v\n%s%s", d.err, d.out.String(), d.errOut.String())
		default:
		}
		return re.MatchString(d.out.String())
	})
	return re.FindStringSubmatch(d.out.String())
}

// stop interrupts the demo, waits for it and returns its error.
func (d *inProcessDemo) stop() error {
	d.cancel()
	<-d.finished
	return d.err
}

// syncBuffer is a bytes.Buffer the demo writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
