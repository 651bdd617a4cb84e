package ops_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
)

// recordedPolicy is a row of opsdesk.tool_policies, as the superuser reads
// it.
type recordedPolicy struct {
	Effect                              string
	LeaseUS, RetentionUS, RetryWindowUS int64
	AfterExpiry, RecordedBy             string
	Previous                            map[string]any
}

func readPolicy(t *testing.T, pool *pgxpool.Pool, tool string) recordedPolicy {
	t.Helper()
	var p recordedPolicy
	err := pool.QueryRow(t.Context(), `
SELECT effect, lease_us, retention_us, retry_window_us, after_expiry, recorded_by, previous
FROM opsdesk.tool_policies WHERE tool = $1`, tool).Scan(
		&p.Effect, &p.LeaseUS, &p.RetentionUS, &p.RetryWindowUS, &p.AfterExpiry, &p.RecordedBy, &p.Previous)
	require.NoError(t, err)
	return p
}

func sessionUser(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var role string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT session_user`).Scan(&role))
	return role
}

// requireCode asserts that err is the server's error code, with a message
// containing each of want.
func requireCode(t *testing.T, err error, code string, want ...string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, "%v", err)
	for _, w := range want {
		require.Contains(t, pgErr.Message, w)
	}
}

// TestToolPolicies: ops.New records each tool's policy in the store, as the
// service login; the service may record policies and nothing else.
func TestToolPolicies(t *testing.T) {
	t.Parallel()

	const recordSQL = `SELECT opsdesk.record_tool_policy($1, $2, $3, $4, $5, $6)`

	t.Run("NewRecordsThePolicies", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		_, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{
			"send-email": {Effect: ops.EffectIdempotentProvider, Lease: 2 * time.Minute, Retention: 48 * time.Hour,
				RetryWindow: 24 * time.Hour, AfterExpiry: ops.RejectAfterExpiry},
			"create-ticket": {Effect: ops.EffectLocal},
		}})
		require.NoError(t, err)

		service := sessionUser(t, d.Service)
		require.Equal(t, recordedPolicy{Effect: "external_idempotent", LeaseUS: (2 * time.Minute).Microseconds(),
			RetentionUS: (48 * time.Hour).Microseconds(), RetryWindowUS: (24 * time.Hour).Microseconds(),
			AfterExpiry: "reject", RecordedBy: service}, readPolicy(t, d.Admin, "send-email"))
		require.Equal(t, recordedPolicy{Effect: "local", LeaseUS: ops.DefaultLease.Microseconds(),
			RetentionUS: ops.DefaultRetention.Microseconds(), RetryWindowUS: ops.DefaultRetention.Microseconds(),
			AfterExpiry: "reexecute", RecordedBy: service}, readPolicy(t, d.Admin, "create-ticket"),
			"defaults applied; the retry window defaults to the retention")
	})

	t.Run("ServiceWritesNothingElse", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		_, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"create-ticket": {Effect: ops.EffectLocal}}})
		require.NoError(t, err)
		ctx := t.Context()
		for _, sql := range []string{
			`INSERT INTO opsdesk.tool_policies (tool, effect, lease_us, retention_us, retry_window_us, after_expiry, recorded_by, recorded_at)
			 VALUES ('x', 'local', 1000000, 1000000, 1000000, 'reexecute', 'someone-else', now())`,
			`UPDATE opsdesk.tool_policies SET recorded_by = 'someone-else'`,
			`DELETE FROM opsdesk.tool_policies`,
			`SELECT count(*) FROM opsdesk.tool_policies`,
			`TRUNCATE opsdesk.tool_policies`,
		} {
			_, err := d.Service.Exec(ctx, sql)
			requireCode(t, err, "42501")
		}
		require.Equal(t, sessionUser(t, d.Service), readPolicy(t, d.Admin, "create-ticket").RecordedBy)
	})

	t.Run("HostileValuesRefused", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		ctx := t.Context()
		day, century := (24 * time.Hour).Microseconds(), ops.MaxRetention.Microseconds()
		for name, c := range map[string]struct {
			args []any
			want []string
		}{
			"LeaseOver24h":        {[]any{"t", "local", day + 1, day, day, "reexecute"}, []string{"lease of 86400000001 microseconds", "24 hours"}},
			"LeaseNegative":       {[]any{"t", "local", -1, day, day, "reexecute"}, []string{"lease", "100ms"}},
			"RetentionOver100y":   {[]any{"t", "local", day, century + 1, day, "reexecute"}, []string{"retention", "100 years"}},
			"RetentionZero":       {[]any{"t", "local", day, 0, day, "reexecute"}, []string{"retention"}},
			"RetryWindowOver100y": {[]any{"t", "local", day, day, century + 1, "reexecute"}, []string{"retry window", "100 years"}},
			"ControlCharacter":    {[]any{"t\x1b[2Jx", "local", day, day, day, "reexecute"}, []string{"control character", `'t?[2Jx'`}},
			"EmptyName":           {[]any{"", "local", day, day, day, "reexecute"}, []string{"empty"}},
			"LongName":            {[]any{strings.Repeat("a", 129), "local", day, day, day, "reexecute"}, []string{"128 bytes"}},
			"UnknownEffect":       {[]any{"t", "root", day, day, day, "reexecute"}, []string{"effect 'root'"}},
			"UnknownAfterExpiry":  {[]any{"t", "local", day, day, day, "shrug"}, []string{"after expiry 'shrug'"}},
			"NullLease":           {[]any{"t", "local", nil, day, day, "reexecute"}, []string{"lease"}},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := d.Service.Exec(ctx, recordSQL, c.args...)
				requireCode(t, err, "23514", c.want...)
			})
		}
		var n int
		require.NoError(t, d.Admin.QueryRow(ctx, `SELECT count(*) FROM opsdesk.tool_policies`).Scan(&n))
		require.Zero(t, n)

		// ops.New refuses the same values before it writes.
		_, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"t": {Effect: ops.EffectLocal, RetryWindow: ops.MaxRetention + 1}}})
		require.ErrorContains(t, err, "retry window")
	})

	t.Run("AtMostAThousandTools", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		ctx := t.Context()
		_, err := d.Admin.Exec(ctx, `
INSERT INTO opsdesk.tool_policies (tool, effect, lease_us, retention_us, retry_window_us, after_expiry, recorded_by, recorded_at)
SELECT 'tool-' || i, 'local', 30000000, 1000000, 1000000, 'reexecute', 'fixture', now() FROM generate_series(1, 1000) i`)
		require.NoError(t, err)
		_, err = ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"one-more": {Effect: ops.EffectLocal}}})
		requireRefusedBy(t, err, "54000")
		require.ErrorContains(t, err, "at most 1000 tools")
		// A tool already recorded may still be recorded again.
		_, err = ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"tool-7": {Effect: ops.EffectLocal}}})
		require.NoError(t, err)
	})

	t.Run("ViewerReadsAndMayNotRecord", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		_, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"create-ticket": {Effect: ops.EffectLocal}}})
		require.NoError(t, err)
		viewer := dbtest.NewPerson(t, d, "viewer", "acme")
		require.Equal(t, "local", readPolicy(t, viewer.Pool, "create-ticket").Effect)
		_, err = viewer.Pool.Exec(t.Context(), recordSQL, "create-ticket", "external_unknown", 100000, 1, 1, "reexecute")
		requireCode(t, err, "42501")
		_, err = viewer.Pool.Exec(t.Context(), `UPDATE opsdesk.tool_policies SET effect = 'external_unknown'`)
		requireCode(t, err, "42501")
	})

	// Two service logins with different policies for one tool: the last
	// writer wins (a deploy that changes a policy must take effect), and
	// the policy it replaced is kept, with its login, for doctor to report.
	t.Run("SecondServiceLastWriterWins", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		first := sessionUser(t, d.Service)
		_, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"charge": {Effect: ops.EffectUnknownOutcome, Retention: 24 * time.Hour}}})
		require.NoError(t, err)
		other := dbtest.NewService(t, d)
		_, err = ops.New(other.Pool, ops.Config{Tools: map[string]ops.Policy{"charge": {Effect: ops.EffectUnknownOutcome, Retention: 48 * time.Hour}}})
		require.NoError(t, err)

		p := readPolicy(t, d.Admin, "charge")
		require.Equal(t, (48 * time.Hour).Microseconds(), p.RetentionUS)
		require.Equal(t, other.Role, p.RecordedBy)
		require.Equal(t, first, p.Previous["recorded_by"])
		require.EqualValues(t, (24 * time.Hour).Microseconds(), p.Previous["retention_us"])

		// The same policy again changes nothing but who recorded it last.
		_, err = ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{"charge": {Effect: ops.EffectUnknownOutcome, Retention: 48 * time.Hour}}})
		require.NoError(t, err)
		p = readPolicy(t, d.Admin, "charge")
		require.Equal(t, first, p.RecordedBy)
		require.Equal(t, first, p.Previous["recorded_by"], "the disagreement stays on record")
	})

}
