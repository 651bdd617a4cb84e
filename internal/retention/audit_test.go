package retention_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/opsdesk/opsdesk/internal/audited"
	"github.com/opsdesk/opsdesk/internal/purgereport"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	auditlog "github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/retention"
	"github.com/opsdesk/opsdesk/reconcile"
)

// answer is a purge function's opsdesk.purge_result as a test reads it.
type answer struct {
	Outcome                        string
	Code, Message, Tenant          *string
	Entry, Run, Purged, Tombstones *int64
	Seq                            *int64 // the entry's, once sealed after the call
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// call runs purge function call fn (e.g. "opsdesk.purge_batch($1, 4)") on q.
func call(t *testing.T, q querier, fn string, args ...any) answer {
	t.Helper()
	var a answer
	require.NoError(t, q.QueryRow(t.Context(), `SELECT outcome, code, message, tenant, entry, run, purged, tombstones FROM `+fn, args...).
		Scan(&a.Outcome, &a.Code, &a.Message, &a.Tenant, &a.Entry, &a.Run, &a.Purged, &a.Tombstones))
	if _, inTx := q.(pgx.Tx); a.Entry != nil && !inTx {
		seal, err := auditlog.Seal(t.Context(), q, str(a.Tenant), *a.Entry)
		require.NoError(t, err)
		a.Seq = &seal.Seq
	}
	return a
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func num(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// auditRecord is what the trail says of a purge, read as the superuser.
type auditRecord struct {
	Role, Action, Outcome, Reason, DisplayName, Tool string
	Details                                          map[string]any
}

func readRecord(t *testing.T, d *dbtest.DB, seq int64) auditRecord {
	t.Helper()
	var r auditRecord
	var details []byte
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT role, action, outcome, coalesce(reason, ''), coalesce(display_name, ''),
    coalesce(tool, ''), details FROM opsdesk.audit WHERE tenant = '' AND seq = $1`, seq).
		Scan(&r.Role, &r.Action, &r.Outcome, &r.Reason, &r.DisplayName, &r.Tool, &details))
	require.NoError(t, json.Unmarshal(details, &r.Details))
	return r
}

func records(t *testing.T, d *dbtest.DB) int {
	t.Helper()
	var n int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.operations`).Scan(&n))
	return n
}

// The run's start record commits before anything is deleted: batches
// (and tombstone removals) in the transaction that started the run are
// refused, savepoints or not; an admin who runs the batches and never
// finishes has left the start record (who, why, what, the promise); a
// resume is audited, and the result record names the start record.
func TestNothingIsDeletedBeforeTheStartRecordCommits(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	ctx := t.Context()

	tx, err := admin.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below; this ends it if the test fails first
	start := call(t, tx, `opsdesk.purge_start(NULL, NULL, '{"create-ticket": 172800}', 'weekly', 9, 'Ann')`)
	require.Equal(t, "succeeded", start.Outcome)
	run := num(start.Run)
	for _, fn := range []string{"opsdesk.purge_batch($1, 100)", "opsdesk.purge_tombstones($1, 100)"} {
		a := call(t, tx, fn, run)
		require.Equal(t, "failed", a.Outcome, fn)
		require.Equal(t, "invalid", str(a.Code))
		require.Contains(t, str(a.Message), "was started (or resumed) in this transaction")
	}
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 14, records(t, d), "nothing went in the transaction that started the run")

	// A savepoint has an ID of its own; the transaction's is the same.
	tx2, err := admin.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx2.Rollback(ctx) //nolint:errcheck // rolled back below; this ends it if the test fails first
	tx = tx2
	_, err = tx.Exec(ctx, `SAVEPOINT s`)
	require.NoError(t, err)
	other := call(t, tx, `opsdesk.purge_start('send-email', NULL, '{}', 'weekly', 3)`)
	require.Equal(t, "succeeded", other.Outcome)
	_, err = tx.Exec(ctx, `RELEASE SAVEPOINT s`)
	require.NoError(t, err)
	a := call(t, tx, "opsdesk.purge_batch($1, 100)", num(other.Run))
	require.Equal(t, "invalid", str(a.Code))
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, 14, records(t, d))

	// Committed: the start record says who, why, what and the promise.
	seal, err := auditlog.Seal(ctx, admin.Pool, "", num(start.Entry))
	require.NoError(t, err)
	rec := readRecord(t, d, seal.Seq)
	require.Equal(t, auditRecord{Role: admin.Role, Action: "retention:purge-start", Outcome: "succeeded", Reason: "weekly",
		DisplayName: "Ann", Details: map[string]any{"run": float64(run), "before": rec.Details["before"],
			"tombstone_for": map[string]any{"create-ticket": float64(172800)}, "promised": float64(9)}}, rec)
	require.NotEmpty(t, rec.Details["before"])

	// The batches run now; the admin stops here and never finishes.
	a = call(t, admin.Pool, "opsdesk.purge_batch($1, 4)", run)
	require.Equal(t, "succeeded", a.Outcome)
	require.EqualValues(t, 4, num(a.Purged))
	require.Nil(t, a.Seq, "a batch appends no record: the start record covers it")

	// Resumed: a resume record, naming the start record and what went.
	dry, err := retention.Eligible(ctx, admin.Pool, retention.PurgeParams{})
	require.NoError(t, err)
	require.Equal(t, run, dry.Resumes)
	res, err := retention.Purge(ctx, admin.Pool, retention.PurgeParams{Reason: "resume after the crash", DryRun: &dry}, nil)
	require.NoError(t, err)
	require.Equal(t, run, res.Run)
	require.EqualValues(t, 9, res.Purged)
	resume := readRecord(t, d, res.StartSeq)
	require.Equal(t, "retention:purge-resume", resume.Action)
	require.Equal(t, "resume after the crash", resume.Reason)
	require.Equal(t, map[string]any{"run": float64(run), "start_entry": float64(num(start.Entry)), "started_by": admin.Role,
		"started_at": resume.Details["started_at"], "before": resume.Details["before"],
		"tombstone_for": map[string]any{"create-ticket": float64(172800)},
		"purged_so_far": float64(4), "promised": float64(5), "may_purge": float64(9)}, resume.Details)

	// The result record names both.
	result := readRecord(t, d, res.AuditSeq)
	require.Equal(t, "retention:purge", result.Action)
	require.Equal(t, "weekly", result.Reason)
	var resumeEntry int64
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT entry FROM opsdesk.audit WHERE tenant = '' AND seq = $1`, res.StartSeq).Scan(&resumeEntry))
	require.EqualValues(t, num(start.Entry), result.Details["start_entry"])
	require.EqualValues(t, resumeEntry, result.Details["last_resume_entry"])
	require.EqualValues(t, 9, result.Details["purged"])
	require.EqualValues(t, 9, result.Details["promised"])
	require.Greater(t, res.AuditSeq, res.StartSeq)
}

// A run purges no more than its start (or resume) promised, whatever
// batch size the caller asks for.
func TestRunTakesNoMoreThanPromised(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	run := startRun(t, admin, `NULL, NULL, '{}', 'weekly', 2`)
	require.EqualValues(t, 2, num(call(t, admin.Pool, "opsdesk.purge_batch($1, 100)", run).Purged))
	require.EqualValues(t, 0, num(call(t, admin.Pool, "opsdesk.purge_batch($1, 100)", run).Purged), "the promise is spent")
	require.Equal(t, 12, records(t, d))
	// A resume promises again, on top of what went.
	require.Equal(t, run, startRun(t, admin, `NULL, NULL, '{}', 'weekly', 1`))
	require.EqualValues(t, 1, num(call(t, admin.Pool, "opsdesk.purge_batch($1, 100)", run).Purged))
	require.Equal(t, 11, records(t, d))

	// Through Go: a dry run that counted nothing purges nothing, though
	// records became purgeable since.
	dry := purgereport.DryRun{Count: 0, Before: time.Now()}
	res, err := retention.Purge(t.Context(), admin.Pool, retention.PurgeParams{Tool: "send-email", Reason: "r", DryRun: &dry}, nil)
	require.NoError(t, err)
	require.Zero(t, res.Purged)
	require.Equal(t, 11, records(t, d))
}

// Every parameter of the purge functions and of set_hold is checked, and
// each refusal is returned and audited (not raised and rolled back). A
// negative tombstone lifetime made tombstones already expired, which
// defeated after_expiry: reject.
func TestPurgeParametersAreChecked(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	run := startRun(t, admin, `NULL, NULL, '{}', 'weekly', 9`)
	var id int64
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT id FROM opsdesk.operations WHERE key = 'kept-1'`).Scan(&id))
	long := strings.Repeat("x", 2001)
	start := func(tool any, before string, tombstones any, reason any, promised any) (string, []any) {
		return `opsdesk.purge_start($1, ` + before + `, $2, $3, $4)`, []any{tool, tombstones, reason, promised}
	}
	type tc struct {
		name string
		fn   string
		args []any
		want string
	}
	var cases []tc
	add := func(name, want string, fn string, args []any) { cases = append(cases, tc{name, fn, args, want}) }
	for name, policy := range map[string]string{
		"Negative":      `{"*": -100}`,
		"Zero":          `{"create-ticket": 0}`,
		"UnderASecond":  `{"*": 0.5}`,
		"Huge":          `{"*": 1e12}`,
		"HugeExponent":  `{"*": 1e400}`,
		"String":        `{"*": "3600"}`,
		"Null":          `{"*": null}`,
		"Object":        `{"*": {"s": 1}}`,
		"EmptyTool":     `{"": 5}`,
		"ControlChar":   `{"a\u001bb": 5}`,
		"LongTool":      `{"` + strings.Repeat("t", 129) + `": 5}`,
		"Array":         `[3600]`,
		"Number":        `3600`,
		"JSONNull":      `null`,
		"TooMuchJSON":   manyTools(7000),
		"NegativeOther": `{"*": 5, "send-email": -1}`,
	} {
		fn, args := start(nil, "NULL", policy, "r", 9)
		add("Tombstones"+name, "tombstone", fn, args)
	}
	fn, args := start(nil, "NULL", nil, "r", 9)
	add("TombstonesSQLNull", "not NULL", fn, args)
	for name, reason := range map[string]any{"Null": nil, "Empty": "", "Spaces": "   ", "TabNewline": "\t\n\r",
		"Ideographic": "\u3000", "Invisible": "\ufeff\u200b ", "NoBreak": " \u00a0\u2028"} {
		fn, args := start(nil, "NULL", "{}", reason, 9)
		add("Reason"+name, "a reason is required", fn, args)
	}
	fn, args = start(nil, "NULL", "{}", long, 9)
	add("ReasonTooLong", "limited to 2000 bytes", fn, args)
	for name, promised := range map[string]any{"Negative": -1, "Null": nil} {
		fn, args := start(nil, "NULL", "{}", "r", promised)
		add("Promised"+name, "the dry run's count", fn, args)
	}
	for name, before := range map[string]string{"Infinity": "'infinity'", "MinusInfinity": "'-infinity'",
		"Future": "now() + interval '1 day'"} {
		fn, args := start(nil, before, "{}", "r", 9)
		add("Before"+name, "no later than now", fn, args)
	}
	for name, tool := range map[string]string{"Empty": "", "Long": strings.Repeat("t", 129), "Escape": "x\x1b[2J"} {
		fn, args := start(tool, "NULL", "{}", "r", 9)
		add("Tool"+name, "tool name", fn, args)
	}
	add("DisplayNameTooLong", "display name", `opsdesk.purge_start(NULL, NULL, '{}', 'r', 9, $1)`, []any{strings.Repeat("n", 201)})
	for _, f := range []string{"purge_batch", "purge_tombstones"} {
		for name, limit := range map[string]any{"Zero": 0, "Negative": -1, "TooMany": 10001, "Null": nil} {
			add(f+"Limit"+name, "from 1 to 10000", `opsdesk.`+f+`($1, $2)`, []any{run, limit})
		}
		for name, r := range map[string]any{"Null": nil, "Zero": 0, "Negative": -5} {
			add(f+"Run"+name, "a number from 1", `opsdesk.`+f+`($1, 10)`, []any{r})
		}
		add(f+"NoSuchRun", "no unfinished purge run 999999", `opsdesk.`+f+`(999999, 10)`, nil)
	}
	for name, r := range map[string]any{"Null": nil, "Zero": 0, "Negative": -5} {
		add("FinishRun"+name, "a number from 1", `opsdesk.purge_finish($1)`, []any{r})
	}
	add("FinishNoSuchRun", "no unfinished purge run 999999", `opsdesk.purge_finish(999999)`, nil)
	add("FinishDisplayNameTooLong", "display name", `opsdesk.purge_finish($1, $2)`, []any{run, strings.Repeat("n", 201)})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := call(t, admin.Pool, c.fn, c.args...)
			require.Equal(t, "failed", a.Outcome)
			require.Equal(t, "invalid", str(a.Code))
			require.Contains(t, str(a.Message), c.want)
			require.NotContains(t, str(a.Message), "\x1b", "stored text is quoted")
			require.Less(t, len(str(a.Message)), 500)
			if a.Seq != nil { // unless refuse's rate limit kept it out
				var refusal string
				require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT details->>'refusal' FROM opsdesk.audit
WHERE tenant = '' AND seq = $1 AND role = $2 AND outcome = 'failed'`, *a.Seq, admin.Role).Scan(&refusal))
				require.Equal(t, "invalid", refusal)
			}
		})
	}
	require.Equal(t, 14, records(t, d))
	require.Equal(t, []string{"1"}, keys(t, d, `SELECT count(*)::text FROM opsdesk.purge_runs`), "no run but the valid one")
	require.Empty(t, keys(t, d, `SELECT key FROM opsdesk.tombstones`))
	var audited int
	require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.audit WHERE outcome = 'failed'`).Scan(&audited))
	require.Positive(t, audited)

	// set_hold's.
	for name, c := range map[string]struct {
		ids    any
		hold   any
		reason any
		want   string
	}{
		"NullArray":    {nil, true, "r", "at least one"},
		"EmptyArray":   {[]int64{}, true, "r", "at least one"},
		"NullID":       {[]*int64{&id, nil}, true, "r", "must not be NULL"},
		"TooMany":      {make([]int64, 10001), true, "r", "up to 10000"},
		"TwoDims":      {[][]int64{{id, id}, {id, id}}, true, "r", "one-dimensional"},
		"NullHold":     {[]int64{id}, nil, "r", "not NULL"},
		"BlankReason":  {[]int64{id}, true, "\t\u3000\n", "a reason is required"},
		"LongReason":   {[]int64{id}, true, long, "limited to 2000 bytes"},
		"ReleaseBlank": {[]int64{id}, false, "\ufeff", "a reason is required"},
	} {
		t.Run("SetHold"+name, func(t *testing.T) {
			var outcome, code, message string
			require.NoError(t, admin.Pool.QueryRow(t.Context(), `SELECT outcome, code, message FROM opsdesk.set_hold($1, $2, $3)`,
				c.ids, c.hold, c.reason).Scan(&outcome, &code, &message))
			require.Equal(t, "failed", outcome)
			require.Equal(t, "invalid", code)
			require.Contains(t, message, c.want)
		})
	}
	require.Empty(t, keys(t, d, `SELECT key FROM opsdesk.operations WHERE held AND key <> 'held-1'`))
}

// manyTools is a tombstone policy of n tools, valid but for its size.
func manyTools(n int) string {
	var b strings.Builder
	b.WriteString(`{"*": 5`)
	for i := range n {
		fmt.Fprintf(&b, `, "tool-%d": 5`, i)
	}
	return b.String() + "}"
}

// The tombstone lifetimes the Go side sends are numbers of whole seconds
// the database accepts, and a catalog lifetime out of bounds is refused
// before anything goes.
func TestPurgeRefusesATombstoneLifetimeOutOfBounds(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	_, err := retention.Purge(t.Context(), admin.Pool, retention.PurgeParams{Reason: "r",
		TombstoneFor: map[string]time.Duration{"create-ticket": -time.Hour}}, nil)
	require.ErrorIs(t, err, reconcile.ErrInvalid)
	require.Contains(t, err.Error(), `the tombstone lifetime of "create-ticket" is -3600 seconds`)
	require.Equal(t, 14, records(t, d))
}

// Refusals of roles that may not purge are returned and audited, with the
// role that tried; nothing goes.
func TestPurgeRefusalsAreAudited(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	run := startRun(t, admin, `NULL, NULL, '{}', 'weekly', 9`)
	for _, p := range []*dbtest.Person{dbtest.NewPerson(t, d, "viewer", "*"), dbtest.NewPerson(t, d, "operator", "*"),
		dbtest.NewPerson(t, d, "admin", "acme")} {
		for i, fn := range []string{`opsdesk.purge_start(NULL, NULL, '{}', 'mine now', 100)`, `opsdesk.purge_batch($1, 100)`,
			`opsdesk.purge_tombstones($1, 100)`, `opsdesk.purge_finish($1)`} {
			var args []any
			if i > 0 {
				args = []any{run}
			}
			a := call(t, p.Pool, fn, args...)
			require.Equal(t, "denied", a.Outcome, fn)
			require.Equal(t, "not_permitted", str(a.Code))
			require.Contains(t, str(a.Message), p.Role+" may not purge")
			if i == 0 {
				require.NotNil(t, a.Seq, "the first refusal is audited")
			}
			if a.Seq != nil {
				var role, outcome string
				require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT role, outcome FROM opsdesk.audit WHERE tenant = '' AND seq = $1`,
					*a.Seq).Scan(&role, &outcome))
				require.Equal(t, p.Role, role)
				require.Equal(t, "denied", outcome)
			}
		}
		// Through Go: a typed error naming the audit record.
		_, err := retention.Purge(t.Context(), p.Pool, retention.PurgeParams{Reason: "x"}, nil)
		var refused *audited.RefusedError
		require.ErrorAs(t, err, &refused)
		require.ErrorIs(t, err, audited.ErrNotPermitted)
	}
	require.Equal(t, 14, records(t, d))
	require.Equal(t, []string{"false"}, keys(t, d, `SELECT (finished_at IS NOT NULL)::text FROM opsdesk.purge_runs`))
}

// A hold or a release is all or nothing: a record that is missing, or
// that the role does not see, holds nothing and is named. Repeated
// numbers count once.
func TestHoldIsAllOrNothing(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	ctx := t.Context()
	var acme, globex int64
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT (SELECT id FROM opsdesk.operations WHERE tenant = 'acme' AND key = 'gone-1'),
    (SELECT id FROM opsdesk.operations WHERE tenant = 'globex' AND key = 'gone-1')`).Scan(&acme, &globex))

	r, err := retention.SetHold(ctx, admin.Pool, []int64{acme, 999999, 999998}, true, "litigation", "", nil)
	require.ErrorIs(t, err, audited.ErrNotFound)
	require.Contains(t, err.Error(), "no operations 999998, 999999 (or not visible to "+admin.Role+"): nothing held")
	require.Equal(t, []int64{999998, 999999}, r.Missing)
	require.Empty(t, keys(t, d, `SELECT key FROM opsdesk.operations WHERE held AND key <> 'held-1'`), "nothing held")
	require.Equal(t, []string{"failed not_found 999998"}, keys(t, d, `SELECT outcome || ' ' || (details->>'refusal') || ' ' || operation_id
FROM opsdesk.audit WHERE action = 'hold:set'`), "the refusal is audited")

	// A one-tenant admin does not see globex's record.
	acmeAdmin := dbtest.NewPerson(t, d, "admin", "acme")
	r, err = retention.SetHold(ctx, acmeAdmin.Pool, []int64{acme, globex}, true, "litigation", "", nil)
	require.ErrorIs(t, err, audited.ErrNotFound)
	require.Equal(t, []int64{globex}, r.Missing)
	require.Empty(t, keys(t, d, `SELECT key FROM opsdesk.operations WHERE held AND key <> 'held-1'`))

	r, err = retention.SetHold(ctx, admin.Pool, []int64{acme, acme, globex}, true, "litigation", "", nil)
	require.NoError(t, err)
	require.Equal(t, retention.HoldResult{Changed: 2}, r)
	r, err = retention.SetHold(ctx, admin.Pool, []int64{acme, globex, 999999}, false, "case closed", "", nil)
	require.ErrorIs(t, err, audited.ErrNotFound)
	require.Contains(t, err.Error(), "nothing released")
	require.Equal(t, []int64{999999}, r.Missing)
	require.Len(t, keys(t, d, `SELECT key FROM opsdesk.operations WHERE held AND key = 'gone-1'`), 2, "still held")
}

// Purge runs count records per tenant and carry reasons: only admins of
// every tenant see them. A one-tenant admin read every tenant's.
func TestPurgeRunsAreForAdminsOfEveryTenant(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	_, err := d.Admin.Exec(t.Context(), `
WITH r AS (INSERT INTO opsdesk.purge_runs (role, tool, before, tombstone_for, reason)
           VALUES ('alice', NULL, now(), '{}', 'merger: globex leaves') RETURNING id)
INSERT INTO opsdesk.purge_batches (run, purged, per_tenant, first_id, last_id)
SELECT id, 3, '{"globex": 3}', 1, 3 FROM r`)
	require.NoError(t, err)
	count := func(p *dbtest.Person) (runs, batches int) {
		require.NoError(t, p.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM opsdesk.purge_runs),
    (SELECT count(*) FROM opsdesk.purge_batches)`).Scan(&runs, &batches))
		return runs, batches
	}
	runs, batches := count(dbtest.NewPerson(t, d, "admin", "acme"))
	require.Zero(t, runs, "a one-tenant admin sees no purge run")
	require.Zero(t, batches)
	runs, batches = count(admin)
	require.Equal(t, 1, runs)
	require.Equal(t, 1, batches)
}

// The dry run's count is bounded above as well as below: a resume adds it
// to what the run purged, and a promise near the bigint limit made that
// sum overflow, which raised "bigint out of range" and rolled the refusal
// back with no audit record.
func TestPromiseIsBounded(t *testing.T) {
	t.Parallel()
	d, admin := setup(t)
	run := startRun(t, admin, `NULL, NULL, '{}', 'weekly', 1`)
	require.EqualValues(t, 1, num(call(t, admin.Pool, "opsdesk.purge_batch($1, 100)", run).Purged))
	for _, promised := range []int64{math.MaxInt64, math.MaxInt64 - 1, 1e15 + 1} {
		a := call(t, admin.Pool, `opsdesk.purge_start(NULL, NULL, '{}', 'weekly', $1)`, promised)
		require.Equal(t, "failed", a.Outcome, "promise %d", promised)
		require.Equal(t, "invalid", str(a.Code))
		require.Contains(t, str(a.Message), "the dry run's count")
		require.NotNil(t, a.Seq, "the refusal is audited")
		require.Equal(t, "retention:purge-start", readRecord(t, d, *a.Seq).Action)
	}
	// A large but possible count still resumes the run.
	require.Equal(t, run, startRun(t, admin, `NULL, NULL, '{}', 'weekly', 1000000000000000`))
}
