package desk_test

// Issue 10: the people's functions under attack. Each test connects as the
// role the attack uses; the superuser only sets up fixtures and inspects.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// answerOf is one function's decision_result, called in SQL: its audit
// entry, and the entry's sequence number once sealed after the call.
type answerOf struct {
	Outcome, Code, Message string
	Tenant                 string
	Entry, Seq             *int64
}

func callSQL(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) answerOf {
	t.Helper()
	var a answerOf
	var code, msg *string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT outcome, code, message, tenant, entry FROM `+sql, args...).
		Scan(&a.Outcome, &code, &msg, &a.Tenant, &a.Entry), sql)
	a.Code, a.Message = deref(code), deref(msg)
	if a.Entry != nil {
		seal, err := auditlog.Seal(t.Context(), pool, a.Tenant, *a.Entry)
		require.NoError(t, err)
		require.Positive(t, seal.Seq, "the entry of %s is sealed", sql)
		a.Seq = &seal.Seq
	}
	return a
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// A completed decision whose reference is not the one the lookup found
// contradicts the lookup, and needs override; the lookup's reference is
// audited.
func TestLookupReferenceContradictsAnotherReference(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-1")
	found := reconcile.Evidence{Lookup: reconcile.LookupFound, Ref: "CH-1118", Summary: "found, reference CH-1118"}
	p := reconcile.DecideParams{OperationID: id, Decision: reconcile.Completed, ExpectVersion: v,
		Reason: "settled by hand", ResultRef: "CH-MANUAL", Evidence: found}
	res, err := desk.Decide(b.ctx, b.operator.Pool, p)
	require.ErrorIs(t, err, reconcile.ErrContradictsLookup)
	require.Equal(t, reconcile.Denied, res.Outcome)
	require.Contains(t, res.Message, "CH-1118")
	var lookupRef string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT details->>'lookup_ref' FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
		res.Tenant, res.Seq).Scan(&lookupRef))
	require.Equal(t, "CH-1118", lookupRef)
	state, _ := b.state(t, id)
	require.Equal(t, "stuck", state)

	// The same reference, white space aside, agrees with the lookup.
	p.ResultRef = "CH-1118\t"
	_, err = desk.Decide(b.ctx, b.operator.Pool, p)
	require.NoError(t, err)
	var stored string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT result_ref FROM opsdesk.operations WHERE id = $1`, id).Scan(&stored))
	require.Equal(t, "CH-1118", stored)

	// Another reference with override is recorded as overriding.
	id2, v2 := b.stuck(t, "acme", "ord-2")
	res, err = desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{OperationID: id2, Decision: reconcile.Completed,
		ExpectVersion: v2, Reason: "the provider merged the charges", ResultRef: "CH-MANUAL", Evidence: found, Override: true})
	require.NoError(t, err)
	audits := b.audits(t)
	last := audits[len(audits)-1]
	require.Equal(t, res.Seq, last.Seq)
	require.True(t, last.Override)
}

// Numbers, intervals and times outside their range are audited 'invalid'
// refusals that change nothing.
func TestNumericParametersAreChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, v := b.stuck(t, "acme", "ord-1")
	decide := func(extra string, args ...any) answerOf {
		return callSQL(t, b.operator.Pool, `opsdesk.decide(p_id => $1, p_decision => $2, p_expect_version => $3,
p_reason => 'checked'`+extra+`)`, args...)
	}
	for _, tc := range []struct {
		name  string
		extra string
		args  []any
	}{
		{"RetentionOfAMicrosecond", `, p_retention => '1 microsecond'`, []any{id, "failed", v}},
		{"RetentionUnderAMinute", `, p_retention => '59 seconds'`, []any{id, "failed", v}},
		{"NegativeRetention", `, p_retention => '-7 days'`, []any{id, "failed", v}},
		{"RetentionOverACentury", `, p_retention => '101 years'`, []any{id, "failed", v}},
		{"NullRetention", `, p_retention => NULL`, []any{id, "failed", v}},
		{"VersionZero", ``, []any{id, "failed", 0}},
		{"NegativeVersion", ``, []any{id, "failed", -3}},
		{"NullVersion", ``, []any{id, "failed", nil}},
		{"SnoozeInThePast", `, p_snooze_until => now() - interval '1 minute'`, []any{id, "defer", v}},
		{"SnoozeTwoYearsAhead", `, p_snooze_until => now() + interval '2 years'`, []any{id, "defer", v}},
		{"SnoozeForever", `, p_snooze_until => 'infinity'`, []any{id, "defer", v}},
		{"IdZero", ``, []any{0, "failed", v}},
		{"NegativeId", ``, []any{-id, "failed", v}},
		{"NullId", ``, []any{nil, "failed", v}},
	} {
		a := decide(tc.extra, tc.args...)
		require.Equal(t, "invalid", a.Code, "%s: %s", tc.name, a.Message)
		require.Equal(t, "failed", a.Outcome, tc.name)
		require.NotNil(t, a.Seq, "%s: audited", tc.name)
	}
	ack := func(seen string) answerOf {
		return callSQL(t, b.operator.Pool, `opsdesk.ack_conflicts($1, `+seen+`, 'seen')`, id)
	}
	for name, seen := range map[string]string{
		"NullAmongSeen":     `ARRAY[1, NULL]::bigint[]`,
		"ZeroAmongSeen":     `ARRAY[0]::bigint[]`,
		"TwoDimensions":     `ARRAY[[1, 2], [3, 4]]::bigint[]`,
		"TenThousandAndOne": `(SELECT array_agg(i) FROM generate_series(1, 10001) i)::bigint[]`,
	} {
		a := ack(seen)
		require.Equal(t, "invalid", a.Code, "%s: %s", name, a.Message)
		require.NotNil(t, a.Seq, "%s: audited", name)
	}
	for _, bad := range []int64{0, -1} {
		a := callSQL(t, b.operator.Pool, `opsdesk.reveal_request($1, 'intent', 'which card')`, bad)
		require.Equal(t, "invalid", a.Code, a.Message)
		a = callSQL(t, b.operator.Pool, `opsdesk.ack_conflicts($1, NULL, 'seen')`, bad)
		require.Equal(t, "invalid", a.Code, a.Message)
		var value []byte
		err := b.operator.Pool.QueryRow(b.ctx, `SELECT opsdesk.reveal_fetch('acme', $1)`, bad).Scan(&value)
		requireCode(t, err, "22023", "reveal_fetch of seq "+fmt.Sprint(bad))
	}
	state, version := b.state(t, id)
	require.Equal(t, "stuck", state)
	require.Equal(t, v, version)

	// The bounds themselves are fine.
	a := decide(`, p_retention => '1 minute'`, id, "defer", v)
	require.Equal(t, "invalid", a.Code, "defer without a snooze time")
	a = decide(`, p_snooze_until => now() + interval '364 days', p_retention => '100 years'`, id, "defer", v)
	require.Equal(t, "succeeded", a.Outcome, a.Message)
}

// A reason of white space only, Unicode's included, is no reason.
func TestWhiteSpaceIsNoReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	newcomer := dbtest.NewPerson(t, b.db, "")
	id, v := b.stuck(t, "acme", "ord-1")
	for _, blank := range []string{"\t", "\n", "\r\n", "\u3000", "\u00a0", "\ufeff", "\u200b", " \t\u2028\u3000 ", "\v\f"} {
		_, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
			OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: blank})
		require.ErrorIs(t, err, reconcile.ErrInvalid, "decide, reason %q", blank)
		_, err = desk.AckConflicts(b.ctx, b.operator.Pool, id, []int64{1}, blank, "")
		require.ErrorIs(t, err, reconcile.ErrInvalid, "ack, reason %q", blank)
		_, _, err = desk.Reveal(b.ctx, b.operator.Pool, id, reconcile.FieldIntent, blank, "")
		require.ErrorIs(t, err, reconcile.ErrInvalid, "reveal, reason %q", blank)
		_, err = desk.GrantAccess(b.ctx, admin.Pool, newcomer.Role, "viewer", "acme", blank, "")
		require.ErrorIs(t, err, reconcile.ErrInvalid, "grant, reason %q", blank)
	}
	state, _ := b.state(t, id)
	require.Equal(t, "stuck", state)

	// A reason is stored trimmed.
	res, err := desk.Decide(b.ctx, b.operator.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: "\u3000 no charge\t\n", DisplayName: "\tAlice "})
	require.NoError(t, err)
	var reason, name string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT reason, display_name FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
		res.Tenant, res.Seq).Scan(&reason, &name))
	require.Equal(t, "no charge", reason)
	require.Equal(t, "Alice", name)
}

// grant_access looks the role up by its exact name: "Grp" is not grp.
func TestGrantAccessNamesRolesExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	viewer := dbtest.NewPerson(t, b.db, "viewer", "*")
	id, v := b.stuck(t, "acme", "ord-1")
	// A group that can log in, with the viewer as its member, and a login
	// whose name is the group's folded to lower case.
	suffix := strings.TrimPrefix(viewer.Role, "opsdesk_test_person_")
	group, lower := "Grp_"+suffix, "grp_"+suffix
	for _, sql := range []string{
		`CREATE ROLE ` + pgx.Identifier{group}.Sanitize() + ` LOGIN`,
		`CREATE ROLE ` + pgx.Identifier{lower}.Sanitize() + ` LOGIN`,
		`GRANT ` + pgx.Identifier{group}.Sanitize() + ` TO ` + pgx.Identifier{viewer.Role}.Sanitize(),
	} {
		_, err := b.db.Admin.Exec(b.ctx, sql)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, r := range []string{group, lower} {
			_, err := b.db.Admin.Exec(context.Background(), `DROP ROLE `+pgx.Identifier{r}.Sanitize())
			require.NoError(t, err)
		}
	})
	res, err := desk.GrantAccess(b.ctx, admin.Pool, group, "operator", "*", "on-call group", "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	require.Contains(t, res.Message, "group with members")
	var member bool
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT pg_has_role($1::text::name, 'opsdesk_operator', 'MEMBER')`, viewer.Role).Scan(&member))
	require.False(t, member, "the viewer became an operator through the group")
	_, err = desk.Decide(b.ctx, viewer.Pool, reconcile.DecideParams{
		OperationID: id, Decision: reconcile.NotExecuted, ExpectVersion: v, Reason: "through the group"})
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	state, _ := b.state(t, id)
	require.Equal(t, "stuck", state)

	// The lower-case login is a person: it may be granted, by its name.
	_, err = desk.GrantAccess(b.ctx, admin.Pool, lower, "viewer", "acme", "joins", "")
	require.NoError(t, err)
	// A name that exists only in another case is no role.
	_, err = desk.GrantAccess(b.ctx, admin.Pool, strings.ToUpper(lower), "viewer", "acme", "typo", "")
	require.ErrorIs(t, err, reconcile.ErrInvalid)
}

// A reveal request gives one fetch, to a role that is still an operator
// seeing the record.
func TestRevealFetchIsOnceAndChecksTheRoleAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	op := dbtest.NewPerson(t, b.db, "operator", "acme")
	id, _ := b.stuck(t, "acme", "ord-1")
	fetch := func(res reconcile.Result) error {
		var value []byte
		return op.Pool.QueryRow(b.ctx, `SELECT opsdesk.reveal_fetch($1, $2)`, res.Tenant, res.Entry).Scan(&value)
	}

	value, res, err := desk.Reveal(b.ctx, op.Pool, id, reconcile.FieldIntent, "which card", "")
	require.NoError(t, err)
	require.Contains(t, string(value), "4242")
	err = fetch(res)
	requireCode(t, err, "42501", "a second fetch of one request")
	require.Contains(t, err.Error(), "fetched already")

	// Requested, then no longer an operator of the tenant.
	res, err = desk.GrantAccess(b.ctx, admin.Pool, op.Role, "operator", "acme", "on call", "")
	require.NoError(t, err)
	req := callSQL(t, op.Pool, `opsdesk.reveal_request($1, 'intent', 'which card')`, id)
	require.Equal(t, "succeeded", req.Outcome)
	_, err = desk.GrantAccess(b.ctx, admin.Pool, op.Role, "viewer", "acme", "left on-call", "")
	require.NoError(t, err)
	err = fetch(reconcile.Result{Tenant: req.Tenant, Entry: *req.Entry})
	requireCode(t, err, "42501", "a fetch after the demotion")

	// Requested, then moved to another tenant.
	_, err = desk.GrantAccess(b.ctx, admin.Pool, op.Role, "operator", "acme", "back on call", "")
	require.NoError(t, err)
	req = callSQL(t, op.Pool, `opsdesk.reveal_request($1, 'intent', 'which card')`, id)
	require.Equal(t, "succeeded", req.Outcome)
	_, err = b.db.Admin.Exec(b.ctx, `UPDATE opsdesk.access SET tenant = 'globex' WHERE role = $1`, op.Role)
	require.NoError(t, err)
	err = fetch(reconcile.Result{Tenant: req.Tenant, Entry: *req.Entry})
	requireCode(t, err, "42501", "a fetch of a tenant no longer seen")

	var fetches int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.reveal_fetches`).Scan(&fetches))
	require.Equal(t, 1, fetches)
}

// A fetch in a transaction that rolls back reads the value and leaves no
// record of its fetch, so the request can be fetched again: PostgreSQL has
// no autonomous transaction to keep the mark. Every fetch is counted where
// no rollback takes it back, and an admin of every tenant sees the count
// exceed the recorded fetches; a one-tenant operator sees no count.
func TestRevealFetchRolledBackIsCounted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	op := dbtest.NewPerson(t, b.db, "operator", "acme")
	id, _ := b.stuck(t, "acme", "ord-1")
	req := callSQL(t, op.Pool, `opsdesk.reveal_request($1, 'intent', 'which card')`, id)
	require.Equal(t, "succeeded", req.Outcome)
	for range 2 {
		tx := b.beginAs(t, op)
		var value []byte
		require.NoError(t, tx.QueryRow(b.ctx, `SELECT opsdesk.reveal_fetch($1, $2)`, req.Tenant, *req.Entry).Scan(&value))
		require.Contains(t, string(value), "4242")
		require.NoError(t, tx.Rollback(b.ctx))
	}
	var value []byte
	require.NoError(t, op.Pool.QueryRow(b.ctx, `SELECT opsdesk.reveal_fetch($1, $2)`, req.Tenant, *req.Entry).Scan(&value))

	var attempted, recorded *int64
	require.NoError(t, admin.Pool.QueryRow(b.ctx, `SELECT attempted, recorded FROM opsdesk.reveal_fetch_counts()`).Scan(&attempted, &recorded))
	require.EqualValues(t, 3, *attempted, "every fetch is counted")
	require.EqualValues(t, 1, *recorded, "the committed one is recorded")
	require.NoError(t, op.Pool.QueryRow(b.ctx, `SELECT attempted, recorded FROM opsdesk.reveal_fetch_counts()`).Scan(&attempted, &recorded))
	require.Nil(t, attempted, "a one-tenant operator learns no count")
	require.Nil(t, recorded)
	_, err := op.Pool.Exec(b.ctx, `SELECT setval('opsdesk.reveal_fetch_attempts', 1)`)
	requireCode(t, err, "42501", "the operator resets the count")
}

// Text of 32 MiB in any parameter is refused with a short answer and a
// small audit record.
func TestHugeInputMakesSmallAuditRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	newcomer := dbtest.NewPerson(t, b.db, "")
	id, v := b.stuck(t, "acme", "ord-1")
	huge := strings.Repeat("x", 32<<20)
	hugeWide := strings.Repeat("é\"\\\u0001", 8<<20) // escapes in JSON, 2-byte characters
	for _, tc := range []struct {
		name string
		pool *pgxpool.Pool
		sql  string
		arg  string
	}{
		{"Lookup", b.operator.Pool, `opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => $2, p_reason => 'r', p_lookup => $3)`, huge},
		{"LookupEscaped", b.operator.Pool, `opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => $2, p_reason => 'r', p_lookup => $3)`, hugeWide},
		{"Decision", b.operator.Pool, `opsdesk.decide(p_id => $1, p_decision => $3, p_expect_version => $2, p_reason => 'r')`, hugeWide},
		{"Reason", b.operator.Pool, `opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => $2, p_reason => $3)`, huge},
		{"ResultRef", b.operator.Pool, `opsdesk.decide(p_id => $1, p_decision => 'completed', p_expect_version => $2, p_reason => 'r', p_result_ref => $3)`, huge},
		{"LookupRef", b.operator.Pool, `opsdesk.decide(p_id => $1, p_decision => 'completed', p_expect_version => $2, p_reason => 'r', p_result_ref => 'a', p_lookup => 'found', p_lookup_ref => $3)`, huge},
		{"DisplayName", b.operator.Pool, `opsdesk.decide(p_id => $1, p_decision => 'failed', p_expect_version => $2, p_reason => 'r', p_display_name => $3)`, hugeWide},
		{"Field", b.operator.Pool, `opsdesk.reveal_request($1, $3, 'r')`, huge},
		{"Role", admin.Pool, `opsdesk.grant_access($3, 'viewer', 'acme', 'r')`, hugeWide},
		{"Level", admin.Pool, `opsdesk.grant_access(session_user, $3, 'acme', 'r')`, huge},
		{"Tenant", admin.Pool, `opsdesk.grant_access($4, 'viewer', $3, 'r')`, huge},
	} {
		// Every case takes the four arguments.
		a := callSQL(t, tc.pool, tc.sql+` WHERE $1::bigint + $2::bigint IS NOT NULL AND $4::text IS NOT NULL`, id, v, tc.arg, newcomer.Role)
		require.Equal(t, "invalid", a.Code, "%s: %.200s", tc.name, a.Message)
		require.LessOrEqual(t, len(a.Message), 1100, tc.name)
		require.NotNil(t, a.Seq, tc.name)
		var details, row int
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT octet_length(details::text), octet_length(a::text) FROM opsdesk.audit a WHERE tenant = $1 AND seq = $2`, a.Tenant, *a.Seq).
			Scan(&details, &row))
		require.LessOrEqual(t, details, 8<<10, "%s: details", tc.name)
		require.LessOrEqual(t, row, 16<<10, "%s: the whole record", tc.name)
	}
	state, version := b.state(t, id)
	require.Equal(t, "stuck", state)
	require.Equal(t, v, version)
}

// stuckRecords makes n stuck records in tenant as fixtures and returns
// their ids (all at version 1).
func (b *bundle) stuckRecords(t *testing.T, tenant string, n int) []int64 {
	t.Helper()
	rows, err := b.db.Admin.Query(b.ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, owner, leased_at, lease_expires_at)
SELECT $1, 'charge-card', 'fixture-' || i, '1', decode(repeat('01', 32), 'hex'), 'external_unknown', 'pending', 'w',
    now() - interval '2 minutes', now() - interval '1 minute'
FROM generate_series(1, $2) i RETURNING id`, tenant, n)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

// timed runs f with a bound well above the policy's 2 s and tells how
// long it took.
func timed(t *testing.T, what string, f func(ctx context.Context) error) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	took := time.Since(start)
	require.NoError(t, err, "%s (after %s)", what, took)
	require.Less(t, took, 10*time.Second, what)
	t.Logf("%s: %s", what, took.Round(time.Millisecond))
	return took
}

// waitFor polls, as the superuser (inspection only), until sql is true.
func (b *bundle) waitFor(t *testing.T, what, sql string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ok bool
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, sql, args...).Scan(&ok))
		if ok {
			return
		}
		require.True(t, time.Now().Before(deadline), "waiting for %s", what)
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bundle) verify(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rep, err := auditlog.Verify(b.ctx, pool, auditlog.VerifyOpts{})
	require.NoError(t, err)
	require.True(t, rep.OK, "audit verify: %+v", rep.Break)
	require.NotEmpty(t, rep.Chains)
}

// 5,000 refusals of one viewer cost the trail at most 31 records a minute,
// and each is counted: in a record of its own or in a summary's count.
func TestRefusalFloodIsCountedNotRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := dbtest.NewPerson(t, b.db, "admin", "*")
	viewer := dbtest.NewPerson(t, b.db, "viewer", "*")
	newcomer := dbtest.NewPerson(t, b.db, "")
	ids := b.stuckRecords(t, "acme", 1)
	const refusals, workers = 5000, 8
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var recorded, counted int
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < refusals; i += workers {
				res, err := desk.Decide(b.ctx, viewer.Pool, reconcile.DecideParams{
					OperationID: ids[0], Decision: reconcile.Failed, ExpectVersion: 1, Reason: "again"})
				if !errors.Is(err, reconcile.ErrNotPermitted) {
					errs <- fmt.Errorf("refusal %d: %w", i, err)
					return
				}
				mu.Lock()
				if res.Entry == 0 {
					counted++
				} else {
					recorded++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	minutes := int(time.Since(start)/time.Minute) + 1 // windows the flood may have opened
	t.Logf("%d refusals in %s: %d recorded, %d counted", refusals, time.Since(start).Round(time.Millisecond), recorded, counted)
	require.Equal(t, refusals, recorded+counted)
	require.LessOrEqual(t, recorded, 30*minutes)

	// The next seal of the '' chain (here a grant's) brings the summary.
	_, err := desk.GrantAccess(b.ctx, admin.Pool, newcomer.Role, "viewer", "acme", "joins", "")
	require.NoError(t, err)
	// (A flood longer than a minute may have brought one already: every
	// seal of the '' chain brings the summaries due.)
	var own, summaries, summarized, byCode int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT count(*) FILTER (WHERE action <> 'refusals:summary'), count(*) FILTER (WHERE action = 'refusals:summary'),
    coalesce(sum((details->>'refusals')::int), 0), coalesce(sum((details->'by_code'->>'not_permitted')::int), 0)
FROM opsdesk.audit WHERE role = $1`, viewer.Role).Scan(&own, &summaries, &summarized, &byCode))
	// A summary may have come while the flood still ran (every seal of
	// the '' chain brings those due): what was counted after it is
	// summarized a minute later, and waits in the role's count.
	var unsummarized int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
SELECT w.counted - coalesce(s.counted, 0) FROM opsdesk.refusal_windows w
LEFT JOIN opsdesk.refusal_summaries s ON s.role = w.role WHERE w.role = $1`, viewer.Role).Scan(&unsummarized))
	require.Equal(t, recorded, own)
	require.GreaterOrEqual(t, summaries, 1)
	require.LessOrEqual(t, summaries, minutes)
	require.Equal(t, refusals, own+summarized+unsummarized, "every refusal is counted")
	require.Equal(t, counted, byCode+unsummarized)
	require.LessOrEqual(t, own+summaries, 31*minutes)

	// Another grant at once: no second summary within the minute.
	_, err = desk.GrantAccess(b.ctx, admin.Pool, newcomer.Role, "operator", "acme", "on call", "")
	require.NoError(t, err)
	b.verify(t, admin.Pool)
	var n int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.audit WHERE action = 'refusals:summary'`).Scan(&n))
	require.Equal(t, summaries, n)
}

// openTx opens a transaction as p on a connection of its own, runs sql in
// it and scans its one value into dst, and leaves the transaction open
// (as a statement that then sleeps would): the returned function rolls
// it back.
func (b *bundle) openTx(t *testing.T, p *dbtest.Person, dst any, sql string, args ...any) func() error {
	t.Helper()
	tx := b.beginAs(t, p)
	require.NoError(t, tx.QueryRow(b.ctx, sql, args...).Scan(dst), sql)
	return func() error { return tx.Rollback(context.Background()) }
}

// beginAs begins a transaction as p on a connection of its own, closed
// when the test ends.
func (b *bundle) beginAs(t *testing.T, p *dbtest.Person) pgx.Tx {
	t.Helper()
	conn, err := pgx.Connect(b.ctx, p.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(b.ctx)
	require.NoError(t, err)
	return tx
}

// conflictAfter has the library retry key in acme with another intent,
// which records a conflict on the record: an UPDATE of its row, made as
// the service login, which takes no gate.
func (b *bundle) conflictAfter(t *testing.T, what, key string) {
	t.Helper()
	timed(t, "the library's conflict on the record "+what, func(ctx context.Context) error {
		_, err := ops.DoExternal(ctx, b.store, chargeReq("acme", key, 999), func(context.Context, ops.Attempt) (receipt, error) {
			return receipt{}, errors.New("must not run")
		})
		if errors.Is(err, ops.ErrIntentConflict) {
			return nil
		}
		return fmt.Errorf("want an intent conflict, got %w", err)
	})
}

// A refused call locks nothing: a one-tenant operator's or admin's refusal
// in a transaction left open (or a statement that then sleeps) does not
// make the library wait to write the record. The library takes no gate,
// so nothing would end the refuser: decide, ack_conflicts and set_hold
// used to lock the record before they checked anything.
func TestRefusalsDoNotStallTheLibrary(t *testing.T) {
	t.Parallel()
	b := setup(t)
	operator := dbtest.NewPerson(t, b.db, "operator", "acme")
	admin := dbtest.NewPerson(t, b.db, "admin", "acme")
	completed := func(key string) int64 {
		_, _, err := b.retry(t, "acme", key, 100)
		require.NoError(t, err)
		var id int64
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT id FROM opsdesk.operations WHERE key = $1`, key).Scan(&id))
		return id
	}
	for _, c := range []struct {
		name, code string
		who        *dbtest.Person
		sql        string
	}{
		{"DecideUnknownDecision", "invalid", operator, `SELECT (opsdesk.decide($1, 'bogus', 1, 'x')).code`},
		{"DecideNotPending", "not_pending", operator, `SELECT (opsdesk.decide($1, 'failed', 2, 'x')).code`},
		{"DecideStaleVersion", "changed", operator, `SELECT (opsdesk.decide($1, 'failed', 1, 'x')).code`},
		{"AckWithoutReason", "invalid", operator, `SELECT (opsdesk.ack_conflicts($1, '{1}', E'\t')).code`},
		{"AckNoConflicts", "no_conflicts", operator, `SELECT (opsdesk.ack_conflicts($1, '{1}', 'seen')).code`},
		{"HoldWithAMissingRecord", "not_found", admin, `SELECT (opsdesk.set_hold(ARRAY[$1, 999999999], true, 'litigation')).code`},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "refused-" + c.name
			id := completed(key)
			var code string
			rollback := b.openTx(t, c.who, &code, c.sql, id)
			require.Equal(t, c.code, code)
			b.conflictAfter(t, "refused", key)
			require.NoError(t, rollback())
		})
	}

	// A call that passed its checks, then waited for its record and found
	// it changed (a decision) or gone (a hold), refuses after letting the
	// records go.
	t.Run("DecideChangedWhileWaiting", func(t *testing.T) {
		id, version := b.stuck(t, "acme", "refused-changed")
		change := b.lockedBySuperuser(t, `UPDATE opsdesk.operations SET version = version + 1 WHERE id = $1`, id)
		code, rollback := b.waiting(t, operator, `SELECT (opsdesk.decide($1, 'failed', $2, 'x')).code`, id, version)
		require.NoError(t, change.Commit(b.ctx))
		require.Equal(t, "changed", <-code)
		b.conflictAfter(t, "whose decision was refused as changed", "refused-changed")
		require.NoError(t, rollback())
	})
	t.Run("HoldOfARecordPurgedWhileWaiting", func(t *testing.T) {
		kept, gone := completed("refused-hold-kept"), completed("refused-hold-gone")
		purge := b.lockedBySuperuser(t, `SELECT FROM opsdesk.operations WHERE id = $1 FOR UPDATE`, kept)
		code, rollback := b.waiting(t, admin, `SELECT (opsdesk.set_hold(ARRAY[$1::bigint, $2], true, 'litigation')).code`, kept, gone)
		_, err := purge.Exec(b.ctx, `DELETE FROM opsdesk.operations WHERE id = $1`, gone)
		require.NoError(t, err)
		require.NoError(t, purge.Commit(b.ctx))
		require.Equal(t, "not_found", <-code)
		b.conflictAfter(t, "whose hold was refused", "refused-hold-kept")
		require.NoError(t, rollback())
	})
}

// lockedBySuperuser runs sql in a transaction of the superuser (a
// fixture: a write that others wait for) and leaves it open.
func (b *bundle) lockedBySuperuser(t *testing.T, sql string, args ...any) pgx.Tx {
	t.Helper()
	tx, err := b.db.Admin.Begin(b.ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(b.ctx, sql, args...)
	require.NoError(t, err)
	return tx
}

// waiting runs sql as p in a transaction on a connection of its own until
// it waits for a lock, and returns its one value (or its error) to come,
// and a function that rolls the transaction back.
func (b *bundle) waiting(t *testing.T, p *dbtest.Person, sql string, args ...any) (<-chan string, func() error) {
	t.Helper()
	tx := b.beginAs(t, p)
	value := make(chan string, 1)
	go func() {
		var v string
		if err := tx.QueryRow(b.ctx, sql, args...).Scan(&v); err != nil {
			v = err.Error()
		}
		value <- v
	}()
	b.waitFor(t, "the wait of "+p.Role,
		`SELECT EXISTS (SELECT FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock')`, p.Role)
	return value, func() error { return tx.Rollback(b.ctx) }
}
