package exporter

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// A scrape seals what has committed before it reads, so a person's
// decision made without sealing (psql, or a command cut short) counts at
// once. When a viewer keeps a seal's transaction open, holding the acme
// chain's head, the entries queued behind it are reported, and only in
// the chains the scraping role sees; once it ends they are sealed.
func TestScrapeSealsAndReportsWhatWaits(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	operator := dbtest.NewPerson(t, d, "operator", "*")
	holder := dbtest.NewPerson(t, d, "viewer", "acme")
	globexViewer := dbtest.NewPerson(t, d, "viewer", "globex")
	every := dbtest.NewPerson(t, d, "viewer", "*")
	var ids []int64
	rows, err := d.Admin.Query(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT 'acme', 'charge-card', 'u' || i, '1', sha256(('u' || i)::bytea), 'external_unknown', 'pending', 'w',
    now() - interval '2h', now() - interval '1h'
FROM generate_series(1, 3) i RETURNING id`)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	deferRecord := func(id int64) {
		t.Helper()
		_, err := operator.Pool.Exec(ctx, `SELECT opsdesk.decide(p_id => $1, p_decision => 'defer', p_expect_version => 1,
    p_reason => 'provider asked', p_snooze_until => now() + interval '1 hour')`, id)
		require.NoError(t, err)
	}

	deferRecord(ids[0]) // queued, not sealed: a plain SQL call
	m := scrape(t, newExporter(every.Pool, Config{}))
	require.Equal(t, 1.0, m.value(t, "opsdesk_operations", "state=deferred,tool=charge-card"), "the scrape sealed the deferral first")
	require.Equal(t, 0.0, m.value(t, "opsdesk_audit_unsealed_entries", ""))
	require.Equal(t, 1.0, m.value(t, "opsdesk_audit_chain_head_seq", "tenant=acme"))

	// The viewer seals the next entry and holds the head.
	deferRecord(ids[1])
	conn, err := pgx.Connect(ctx, holder.DSN)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT opsdesk.audit_seal()`)
	require.NoError(t, err)
	deferRecord(ids[2])

	m = scrape(t, newExporter(every.Pool, Config{}))
	// The entry the viewer's seal took stays queued for others until it
	// commits, and the one after it waits.
	require.Equal(t, 2.0, m.value(t, "opsdesk_audit_unsealed_entries", ""))
	require.Greater(t, m.value(t, "opsdesk_audit_oldest_unsealed_seconds", ""), 0.0)
	other := scrape(t, newExporter(globexViewer.Pool, Config{}))
	require.Equal(t, 0.0, other.value(t, "opsdesk_audit_unsealed_entries", ""), "acme's queue is not globex's viewer's")

	require.NoError(t, tx.Rollback(ctx))
	m = scrape(t, newExporter(every.Pool, Config{}))
	require.Equal(t, 0.0, m.value(t, "opsdesk_audit_unsealed_entries", ""))
	require.Equal(t, 0.0, m.value(t, "opsdesk_audit_oldest_unsealed_seconds", ""))
	require.Equal(t, 3.0, m.value(t, "opsdesk_audit_chain_head_seq", "tenant=acme"))
}
