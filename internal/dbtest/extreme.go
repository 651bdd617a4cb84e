package dbtest

import "testing"

// The keys of InsertExtremeTimes's records, all of tenant acme.
const (
	// LeaseNeverEnds is pending, leased now, until 'infinity'.
	LeaseNeverEnds = "lease-never-ends"
	// LeaseToYear294276 is pending, leased now, until the last second of
	// year 294276, PostgreSQL's last.
	LeaseToYear294276 = "lease-year-294276"
	// LeaseEndedAlways is stuck: leased from '-infinity' to '-infinity',
	// created in 4713 BC, PostgreSQL's first year.
	LeaseEndedAlways = "lease-ended-always"
	// KeptForEver is completed, every time infinite: created, leased,
	// completed and last in conflict at '-infinity', updated at and
	// expiring at 'infinity'.
	KeptForEver = "kept-for-ever"
	// KeptToYear294276 is completed at 'infinity', expiring in year
	// 294276.
	KeptToYear294276 = "kept-to-294276"
)

// ExtremeKeys are the keys of InsertExtremeTimes's records.
var ExtremeKeys = []string{LeaseNeverEnds, LeaseToYear294276, LeaseEndedAlways, KeptForEver, KeptToYear294276}

// InsertExtremeTimes inserts, as the superuser, records whose times no
// service may write (migration 00024): what a superuser or a restored
// backup can leave, and every reader must read. The pending ones are
// charge-card (external_unknown), the completed ones create-ticket (local).
func InsertExtremeTimes(t testing.TB, d *DB) {
	t.Helper()
	_, err := d.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, created_at, completed_at, expires_at)
SELECT 'acme', r.tool, r.key, '1', sha256(r.key::bytea), r.effect, r.state, r.outcome, 'w', r.leased, r.lease, r.created,
    r.completed, r.expires
FROM (VALUES
    ($1, 'charge-card', 'external_unknown', 'pending', NULL, now(), 'infinity'::timestamptz, now(), NULL::timestamptz,
        NULL::timestamptz),
    ($2, 'charge-card', 'external_unknown', 'pending', NULL, now(), '294276-12-31 23:59:59+00', now(), NULL, NULL),
    ($3, 'charge-card', 'external_unknown', 'pending', NULL, '-infinity', '-infinity', '4713-01-01 00:00:00+00 BC', NULL, NULL),
    ($4, 'create-ticket', 'local', 'completed', 'succeeded', '-infinity', '-infinity', '-infinity', '-infinity', 'infinity'),
    ($5, 'create-ticket', 'local', 'completed', 'succeeded', now(), now(), now(), 'infinity', '294276-12-31 23:59:59+00')
) AS r (key, tool, effect, state, outcome, leased, lease, created, completed, expires)`,
		LeaseNeverEnds, LeaseToYear294276, LeaseEndedAlways, KeptForEver, KeptToYear294276)
	if err == nil {
		_, err = d.Admin.Exec(t.Context(), `UPDATE opsdesk.operations
SET updated_at = 'infinity', last_conflict_at = '-infinity', conflict_count = 1 WHERE tenant = 'acme' AND key = $1`, KeptForEver)
	}
	if err != nil {
		t.Fatalf("insert records with extreme times: %v", err)
	}
}
