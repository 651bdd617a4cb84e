package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

const fleetLease = time.Second

// fleetBundle is a running fleet on its own database and provider.
type fleetBundle struct {
	db       *dbtest.DB
	provider *demo.Provider
	fleet    *demo.Fleet
}

func startFleet(t *testing.T, seed uint64) *fleetBundle {
	t.Helper()
	d := dbtest.New(t)
	_, err := d.Admin.Exec(t.Context(), demo.Schema)
	require.NoError(t, err)
	p := startProvider(t)
	f, err := demo.StartFleet(t.Context(), demo.FleetConfig{
		Pool:        d.Service,
		ProviderURL: p.URL(),
		Workers:     4,
		Rate:        25,
		Seed:        seed,
		Lease:       fleetLease,
		CallTimeout: 500 * time.Millisecond,
		SlowCall:    2 * fleetLease,
	})
	require.NoError(t, err)
	t.Cleanup(f.Stop) // before the provider closes and the database is dropped
	return &fleetBundle{db: d, provider: p, fleet: f}
}

// identities runs a query returning (tenant, tool, key) rows as the
// superuser.
func (b *fleetBundle) identities(t *testing.T, sql string, args ...any) []ops.Identity {
	t.Helper()
	rows, _ := b.db.Admin.Query(t.Context(), sql, args...)
	ids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ops.Identity, error) {
		var id ops.Identity
		err := row.Scan(&id.Tenant, &id.Tool, &id.Key)
		return id, err
	})
	require.NoError(t, err)
	return ids
}

func (b *fleetBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Admin.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

// TestFleetShowsEveryState runs the fleet until the store has shown every
// state an operator must understand, polling with a deadline.
func TestFleetShowsEveryState(t *testing.T) {
	t.Parallel()
	b := startFleet(t, 1)

	conditions := []string{
		"completed succeeded", "completed rejected", "released", "pending, lease live",
		"pending, lease renewed past its length (a slow call)", "stuck (lease expired)",
		"stuck, the provider acted", "stuck, the provider did not act",
		"conflict recorded", "taken over (attempt 2 or more)",
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(seen) < len(conditions) {
		c, err := demo.CountStates(t.Context(), b.db.Admin)
		require.NoError(t, err)
		mark := func(cond string, ok bool) {
			if ok {
				seen[cond] = true
			}
		}
		mark("completed succeeded", c.Succeeded > 0)
		mark("completed rejected", c.Rejected > 0)
		mark("released", c.Released > 0)
		mark("pending, lease live", c.Live > 0)
		mark("stuck (lease expired)", c.Stuck > 0)
		mark("conflict recorded", c.Conflicts > 0)
		mark("pending, lease renewed past its length (a slow call)", b.count(t, `
SELECT count(*) FROM opsdesk.operations
WHERE state = 'pending' AND lease_expires_at > now() AND lease_expires_at - leased_at > $1`, fleetLease) > 0)
		mark("taken over (attempt 2 or more)", b.count(t, `
SELECT count(*) FROM opsdesk.operations WHERE state = 'completed' AND attempt > 1`) > 0)
		// The opposite truths behind stuck records, as an operator finds
		// them: through the provider's lookup.
		for _, id := range b.identities(t, `
SELECT tenant, tool, key FROM opsdesk.operations
WHERE state = 'pending' AND lease_expires_at <= now() AND effect = 'external_unknown'
ORDER BY id LIMIT 50`) {
			found, _ := lookup(t, b.provider.URL(), demo.ProviderIdentity(id))
			mark("stuck, the provider acted", found)
			mark("stuck, the provider did not act", !found)
		}

		if time.Now().After(deadline) {
			var missing []string
			for _, cond := range conditions {
				if !seen[cond] {
					missing = append(missing, cond)
				}
			}
			t.Fatalf("after 2 minutes never saw: %s\ncounts: %v\nfleet: %v\nunexpected: %v",
				strings.Join(missing, "; "), c, b.fleet.Stats(), b.fleet.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.fleet.Stop()
	require.NoError(t, b.fleet.Err(), "every call ended the way its scenario says: %v", b.fleet.Stats())

	stats := b.fleet.Stats()
	t.Logf("fleet calls by disposition: %v", stats)
	for _, d := range []string{"created", "replayed", "rejected", "conflict", "not_applied", "outcome_unknown", "crash"} {
		require.Positive(t, stats[d], "fleet calls ending %s: %v", d, stats)
	}
	require.Positive(t, stats["in_progress"]+stats["needs_reconciliation"], "retries of abandoned records are refused: %v", stats)

	t.Run("AbandonedRecordsMatchTheProvidersTruth", func(t *testing.T) {
		abandoned := b.fleet.Abandoned()
		acted := map[bool]int{}
		for _, a := range abandoned {
			found, ref := lookup(t, b.provider.URL(), demo.ProviderIdentity(a.Identity))
			require.Equal(t, a.ProviderActed, found, "%s (%s): lookup", a.Identity, a.Scenario)
			if found {
				truth, _ := b.provider.Effect(demo.ProviderIdentity(a.Identity))
				require.Equal(t, truth, ref)
			}
			acted[found]++
			rec := b.lookupRecord(t, a.Identity)
			require.Equal(t, ops.StatePending, rec.State, "%s (%s) stays pending: nobody guesses its outcome", a.Identity, a.Scenario)
			require.Empty(t, rec.ResultRef)
		}
		require.Positive(t, acted[true], "abandoned records the provider acted on")
		require.Positive(t, acted[false], "abandoned records the provider never acted on")
	})

	t.Run("StoredReferencesAreTheProviders", func(t *testing.T) {
		// Every completed external success stores the reference of the one
		// effect the provider applied, also after a takeover.
		ids := b.identities(t, `
SELECT tenant, tool, key FROM opsdesk.operations
WHERE state = 'completed' AND outcome = 'succeeded' AND effect <> 'local'`)
		require.NotEmpty(t, ids)
		for _, id := range ids {
			truth, ok := b.provider.Effect(demo.ProviderIdentity(id))
			require.True(t, ok, "%s completed but the provider never acted", id)
			_, raw := b.provider.Effect(id)
			require.False(t, raw, "%s: the provider was sent the raw key, not the provider key", id)
			require.Equal(t, truth, b.lookupRecord(t, id).ResultRef, id.String())
		}
	})

	t.Run("WorkersAreSeparateOwners", func(t *testing.T) {
		owners := b.strings(t, `SELECT DISTINCT owner FROM opsdesk.operations ORDER BY 1`)
		require.GreaterOrEqual(t, len(owners), 2, "owners: %v", owners)
		restarted := false
		for _, o := range owners {
			require.Regexp(t, `^worker-[1-4](\.\d+)?$`, o)
			restarted = restarted || strings.Contains(o, ".")
		}
		require.True(t, restarted, "a crashed worker comes back as a new owner: %v", owners)
		require.Positive(t, b.count(t, `SELECT count(*) FROM demo.tickets`)+b.count(t, `SELECT count(*) FROM demo.notes`),
			"the local tools wrote business rows")
		tenants := b.strings(t, `SELECT DISTINCT tenant FROM opsdesk.operations ORDER BY 1`)
		require.Equal(t, []string{"acme", "globex", "initech"}, tenants)
	})
	t.Run("OperatorsDecideFromTheLookupAndRetriesFollow", func(t *testing.T) {
		// Last, as it changes the store. As an operator would: run the
		// catalog's lookup for each abandoned record, decide by its
		// answer, and see what the service's next retry gets.
		catalog := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, demo.WriteCatalog(catalog, demo.CatalogParams{DSN: b.db.AdminDSN, ProviderURL: b.provider.URL(), Lease: fleetLease}))
		cfg, err := config.Load(config.Options{File: catalog})
		require.NoError(t, err)
		operator := dbtest.NewPerson(t, b.db, "operator", "*")
		store, err := ops.New(b.db.Service, ops.Config{Tools: demo.Policies(fleetLease), Owner: "test-retrier"})
		require.NoError(t, err)
		time.Sleep(fleetLease) // every abandoned lease has run out
		decided := map[reconcile.Decision]int{}
		for _, a := range b.fleet.Abandoned() {
			spec := cfg.Tools[a.Tool].Lookup
			require.NotNil(t, spec, a.Tool)
			ans := reconcile.Ask(t.Context(), http.DefaultClient, reconcile.LookupSpec(*spec), a.Tenant, a.Tool, a.Key)
			require.NoError(t, ans.Err, a.Identity.String())
			require.Equal(t, a.ProviderActed, ans.Evidence.Lookup == reconcile.LookupFound, "%s (%s)", a.Identity, a.Scenario)
			truth, _ := b.provider.Effect(demo.ProviderIdentity(a.Identity))
			require.Equal(t, truth, ans.ResultRef, a.Identity.String())

			rec := b.lookupRecord(t, a.Identity)
			p := reconcile.DecideParams{OperationID: rec.ID, ExpectVersion: rec.Version, Decision: reconcile.NotExecuted,
				Reason: "per the provider's lookup", Evidence: ans.Evidence}
			if ans.Evidence.Lookup == reconcile.LookupFound {
				p.Decision, p.ResultRef = reconcile.Completed, ans.ResultRef
			}
			_, err := desk.Decide(t.Context(), operator.Pool, p)
			require.NoError(t, err, a.Identity.String())
			decided[p.Decision]++

			req, ok := b.fleet.Request(a.Identity)
			require.True(t, ok)
			ran := false
			out, err := ops.DoExternal(t.Context(), store, req, func(context.Context, ops.Attempt) (json.RawMessage, error) {
				ran = true
				return json.RawMessage(`{}`), nil
			})
			require.NoError(t, err, a.Identity.String())
			if p.Decision == reconcile.Completed {
				require.False(t, ran, "%s: a confirmed effect runs again", a.Identity)
				require.Equal(t, ops.Replayed, out.Disposition)
				require.Equal(t, truth, out.ResultRef)
			} else {
				require.True(t, ran, "%s: a released effect does not run again", a.Identity)
				require.Equal(t, ops.Created, out.Disposition)
				require.GreaterOrEqual(t, out.Attempt, 2)
			}
		}
		require.Positive(t, decided[reconcile.Completed])
		require.Positive(t, decided[reconcile.NotExecuted])
	})

}

func (b *fleetBundle) lookupRecord(t *testing.T, id ops.Identity) ops.Record {
	t.Helper()
	store, err := ops.New(b.db.Service, ops.Config{Tools: demo.Policies(fleetLease), Owner: "test-reader"})
	require.NoError(t, err)
	rec, err := store.Read(t.Context(), id)
	require.NoError(t, err)
	return rec
}

func (b *fleetBundle) strings(t *testing.T, sql string) []string {
	t.Helper()
	rows, _ := b.db.Admin.Query(t.Context(), sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// A call the store did not answer is the library doing its job, not the
// fleet failing; a refusal or any other answer still is.
func TestStoreStalled(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code} }
	for err, want := range map[error]bool{
		&ops.UnavailableError{Err: context.DeadlineExceeded}:                     true,
		&ops.UnavailableError{Err: errors.New("dial unix: connection refused")}:  true,
		&ops.OutcomeUnknownError{Step: ops.StepCommit, Err: io.ErrUnexpectedEOF}: true,
		&ops.OutcomeUnknownError{Err: pg("55P03")}:                               true, // lock_timeout
		&ops.UnavailableError{Err: pg("57014")}:                                  true, // statement_timeout
		&ops.UnavailableError{Err: pg("23505")}:                                  false,
		&ops.OutcomeUnknownError{Err: pg("42501")}:                               false,
		errors.New("wrong answer"):                                               false,
		ops.ErrIntentConflict:                                                    false,
	} {
		require.Equal(t, want, demo.StoreStalled(err), "%v", err)
	}
}
