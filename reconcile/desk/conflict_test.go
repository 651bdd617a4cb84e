package desk_test

// Issue 13, section 4: an operator reveals, audited, the two requests of a
// conflict side by side, and the fields that differ. Each test connects as
// the role the attack uses; the superuser sets up fixtures and inspects.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// rawReq is a charge whose intent is JSON text as it is.
func rawReq(tenant, key, intent string) ops.Request {
	return ops.Request{Identity: ops.Identity{Tenant: tenant, Tool: toolCharge, Key: key}, Version: "1",
		Intent: json.RawMessage(intent)}
}

// conflictOf records a pending charge of intent original (its provider
// call timed out) and has the service retry it with intent attempted: a
// conflict. It returns the record's id and the conflict.
func (b *bundle) conflictOf(t *testing.T, tenant, key, original, attempted string) (int64, *ops.IntentConflictError) {
	t.Helper()
	_, err := ops.DoExternal(b.ctx, b.store, rawReq(tenant, key, original), func(context.Context, ops.Attempt) (receipt, error) {
		return receipt{}, errors.New("provider timed out")
	})
	require.ErrorIs(t, err, ops.ErrOutcomeUnknown)
	_, err = ops.DoExternal(b.ctx, b.store, rawReq(tenant, key, attempted), func(context.Context, ops.Attempt) (receipt, error) {
		return receipt{}, errors.New("a conflict must not run")
	})
	var conflict *ops.IntentConflictError
	require.ErrorAs(t, err, &conflict)
	var id int64
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT id FROM opsdesk.operations WHERE tenant = $1 AND key = $2`, tenant, key).Scan(&id))
	return id, conflict
}

// canonical is the library's canonical request for a raw intent.
func canonical(t *testing.T, intent string) string {
	t.Helper()
	req := rawReq("acme", "k", intent)
	c, _, err := ops.Canonical(req.Tool, req.Version, req.Intent)
	require.NoError(t, err)
	return string(c)
}

// auditOf reads one audit record's action, outcome, operation and details
// (inspection only).
func (b *bundle) auditOf(t *testing.T, res reconcile.Result) (action, outcome string, operationID *int64, details map[string]any) {
	t.Helper()
	var raw []byte
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT action, outcome, operation_id, details FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
		res.Tenant, res.Seq).Scan(&action, &outcome, &operationID, &raw))
	require.NoError(t, json.Unmarshal(raw, &details))
	return action, outcome, operationID, details
}

func TestRevealConflictShowsBothRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, conflict := b.conflictOf(t, "acme", "ord-1", `{"amount":100,"card":"4242"}`, `{"card":"4242","amount":500,"note":"retry"}`)

	rev, res, err := desk.RevealConflict(b.ctx, b.operator.Pool, conflict.ConflictID, "what did the caller send?", "Alice")
	require.NoError(t, err)
	require.Equal(t, `{"intent":{"amount":100,"card":"4242"},"tool":"charge-card","version":"1"}`, string(rev.Original.Request))
	require.Equal(t, `{"intent":{"amount":500,"card":"4242","note":"retry"},"tool":"charge-card","version":"1"}`, string(rev.Attempted.Request),
		"the attempted request as the library fingerprinted it")
	require.Equal(t, conflict.Stored, ops.Fingerprint(sha256.Sum256(rev.Original.Request)))
	require.Equal(t, conflict.Attempted, ops.Fingerprint(sha256.Sum256(rev.Attempted.Request)))
	require.True(t, rev.Original.Fingerprinted)
	require.True(t, rev.Attempted.Fingerprinted)
	require.Empty(t, rev.DiffError)
	require.Equal(t, []reconcile.Diff{
		{Path: "/intent/amount", Kind: reconcile.DiffChanged, Original: json.RawMessage("100"), Attempted: json.RawMessage("500")},
		{Path: "/intent/note", Kind: reconcile.DiffAdded, Attempted: json.RawMessage(`"retry"`)},
	}, rev.Diffs)

	// Audited, about the record, naming the conflict.
	action, outcome, operationID, details := b.auditOf(t, res)
	require.Equal(t, "reveal:conflict", action)
	require.Equal(t, "succeeded", outcome)
	require.Equal(t, id, *operationID)
	require.EqualValues(t, conflict.ConflictID, details["conflict"])
	require.Equal(t, "acme", res.Tenant)

	// One fetch per request, by its requester only, in a transaction of
	// its own; the record's reveal_fetch does not fetch it.
	fetch := func(p *dbtest.Person, sql string) error {
		var v []byte
		return p.Pool.QueryRow(b.ctx, sql, res.Tenant, res.Entry).Scan(&v)
	}
	err = fetch(b.operator, `SELECT attempted_request FROM opsdesk.reveal_conflict_fetch($1, $2)`)
	requireCode(t, err, "42501", "a second fetch")
	require.ErrorContains(t, err, "fetched already")
	err = fetch(b.operator, `SELECT opsdesk.reveal_fetch($1, $2)`)
	requireCode(t, err, "42501", "a conflict's request through reveal_fetch")
	other := dbtest.NewPerson(t, b.db, "operator", "*")
	req := callSQL(t, b.operator.Pool, `opsdesk.reveal_conflict_request($1, 'again')`, conflict.ConflictID)
	require.Equal(t, "succeeded", req.Outcome)
	res = reconcile.Result{Tenant: req.Tenant, Entry: *req.Entry}
	err = fetch(other, `SELECT attempted_request FROM opsdesk.reveal_conflict_fetch($1, $2)`)
	requireCode(t, err, "42501", "another operator fetches")
	tx := b.beginAs(t, b.operator)
	_, err = tx.Exec(b.ctx, `SELECT opsdesk.reveal_conflict_request($1, 'peek')`, conflict.ConflictID)
	require.NoError(t, err)
	var v []byte
	err = tx.QueryRow(b.ctx, `SELECT attempted_request FROM opsdesk.reveal_conflict_fetch($1, $2)`, res.Tenant, res.Entry).Scan(&v)
	requireCode(t, err, "25000", "a fetch in a transaction that wrote")
	require.NoError(t, tx.Rollback(b.ctx))
	require.NoError(t, fetch(b.operator, `SELECT attempted_request FROM opsdesk.reveal_conflict_fetch($1, $2)`), "unfetched until now")
}

// The service stores the attempted request and never reads it back; a
// viewer never sees it and is refused the reveal, audited.
func TestConflictRequestIsHiddenFromTheServiceAndViewers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, conflict := b.conflictOf(t, "acme", "ord-1", `{"amount":100}`, `{"amount":666}`)
	var stored string
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT intent::text FROM opsdesk.conflicts WHERE id = $1`, conflict.ConflictID).Scan(&stored))
	require.Equal(t, canonical(t, `{"amount":666}`), stored, "stored by the library, as it was fingerprinted")

	viewer := dbtest.NewPerson(t, b.db, "viewer", "*")
	for _, who := range []*dbtest.Person{{Role: "service", Pool: b.db.Service}, viewer} {
		for _, sql := range []string{
			`SELECT intent FROM opsdesk.conflicts`,
			`SELECT count(*) FROM opsdesk.conflicts WHERE intent::text LIKE '%666%'`,
			`SELECT c FROM opsdesk.conflicts c`,
			`UPDATE opsdesk.conflicts SET intent = NULL`,
			`INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, intent)
			 SELECT tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, 'x', '{}' FROM opsdesk.conflicts
			 RETURNING intent`,
			`SELECT * FROM opsdesk.reveal_conflict_fetch('acme', 1)`,
		} {
			_, err := who.Pool.Exec(b.ctx, sql)
			requireCode(t, err, "42501", who.Role+": "+sql)
		}
	}
	_, err := b.db.Service.Exec(b.ctx, `SELECT * FROM opsdesk.reveal_conflict_request(1, 'x')`)
	requireCode(t, err, "42501", "the service reveals")

	_, res, err := desk.RevealConflict(b.ctx, viewer.Pool, conflict.ConflictID, "curious", "")
	require.ErrorIs(t, err, reconcile.ErrNotPermitted)
	action, outcome, _, details := b.auditOf(t, res)
	require.Equal(t, "reveal:conflict", action)
	require.Equal(t, "denied", outcome)
	require.Equal(t, "", res.Tenant, "a refusal without rights is on the '' chain")
	require.Equal(t, "acme", details["tenant"])
	// The viewer cannot fetch an operator's request either.
	_, res, err = desk.RevealConflict(b.ctx, b.operator.Pool, conflict.ConflictID, "which amount", "")
	require.NoError(t, err)
	var v []byte
	err = viewer.Pool.QueryRow(b.ctx, `SELECT attempted_request FROM opsdesk.reveal_conflict_fetch($1, $2)`, res.Tenant, res.Entry).Scan(&v)
	requireCode(t, err, "42501", "a viewer fetches")
}

// A one-tenant operator does not see another tenant's conflict: not found,
// worded as for a conflict that does not exist, audited on the "" chain
// without the other tenant's name.
func TestRevealConflictOfAnotherTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, conflict := b.conflictOf(t, "globex", "ord-1", `{"amount":1}`, `{"amount":2}`)
	acme := dbtest.NewPerson(t, b.db, "operator", "acme")

	for _, id := range []int64{conflict.ConflictID, 987654321} {
		rev, res, err := desk.RevealConflict(b.ctx, acme.Pool, id, "let me see", "")
		require.ErrorIs(t, err, reconcile.ErrNotFound)
		require.Nil(t, rev.Original.Request)
		require.Nil(t, rev.Attempted.Request)
		require.Equal(t, "", res.Tenant)
		_, outcome, operationID, details := b.auditOf(t, res)
		require.Equal(t, "failed", outcome)
		require.Nil(t, operationID)
		require.NotContains(t, details, "tenant")
		// Absent and hidden read alike.
		require.Equal(t, fmt.Sprintf("no conflict %d (or not visible to %s)", id, acme.Role), res.Message)
	}

	// A conflict whose writer (the service may insert any) stored a
	// request beside fingerprints it does not hash to says so.
	acmeID, _ := b.conflictOf(t, "acme", "ord-2", `{"amount":3}`, `{"amount":4}`)
	var liar int64
	require.NoError(t, b.db.Service.QueryRow(b.ctx, `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, intent)
VALUES ('acme', $1, 'ord-2', $2, '1', decode(repeat('ab', 32), 'hex'), decode(repeat('cd', 32), 'hex'), 'liar', '{"x":1}')
RETURNING id`, toolCharge, acmeID).Scan(&liar))
	rev, res, err := desk.RevealConflict(b.ctx, acme.Pool, liar, "what is this", "")
	require.NoError(t, err)
	require.Equal(t, canonical(t, `{"amount":3}`), string(rev.Original.Request))
	require.Equal(t, `{"x":1}`, string(rev.Attempted.Request))
	require.False(t, rev.Original.Fingerprinted, "the conflict's original fingerprint is not the record's")
	require.False(t, rev.Attempted.Fingerprinted, "the request does not hash to the conflict's fingerprint")
	_, _, operationID, _ := b.auditOf(t, res)
	require.Equal(t, acmeID, *operationID)
}

// Conflicts recorded before schema version 19, or by a library older
// than it, have no attempted request, and say which.
func TestConflictsWithoutARequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, conflict := b.conflictOf(t, "acme", "ord-1", `{"amount":1}`, `{"amount":2}`)
	// As migration 00019 found them.
	var before int64
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, intent)
SELECT tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, NULL
FROM opsdesk.conflicts WHERE id = $1 RETURNING id`, conflict.ConflictID).Scan(&before))
	// As a library of schema version 18 writes them: without the column.
	var older int64
	require.NoError(t, b.db.Service.QueryRow(b.ctx, `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
VALUES ('acme', $1, 'ord-1', $2, '1', $3, $4, 'old-worker') RETURNING id`, toolCharge, id, conflict.Attempted[:], conflict.Stored[:]).Scan(&older))

	for _, tc := range []struct {
		id   int64
		want string
	}{
		{before, "not recorded: conflict %d predates migration 00019 (schema version 19)"},
		{older, "not recorded: conflict %d was recorded by an opsdesk library older than schema version 19"},
	} {
		rev, _, err := desk.RevealConflict(b.ctx, b.operator.Pool, tc.id, "what was it", "")
		require.NoError(t, err)
		require.Equal(t, canonical(t, `{"amount":1}`), string(rev.Original.Request))
		require.True(t, rev.Original.Fingerprinted)
		require.Nil(t, rev.Attempted.Request)
		require.False(t, rev.Attempted.Fingerprinted)
		require.Contains(t, rev.Attempted.NotRecorded, fmt.Sprintf(tc.want, tc.id))
		require.Nil(t, rev.Diffs)
		require.Contains(t, rev.DiffError, "the attempted request is not recorded")
	}

	// Neither side recorded: nothing to reveal, refused and audited.
	ids := b.stuckRecords(t, "acme", 1)
	var bare int64
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner)
SELECT tenant, tool, key, id, '1', decode(repeat('ee', 32), 'hex'), fingerprint, 'w' FROM opsdesk.operations WHERE id = $1
RETURNING id`, ids[0]).Scan(&bare))
	_, res, err := desk.RevealConflict(b.ctx, b.operator.Pool, bare, "anything?", "")
	require.ErrorIs(t, err, reconcile.ErrNoValue)
	require.Equal(t, "acme", res.Tenant)
}

// Hostile requests come back exactly as fingerprinted, with paths that
// name one field each.
func TestRevealConflictOfHostileRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reveal := func(t *testing.T, key, original, attempted string) reconcile.ConflictReveal {
		t.Helper()
		_, conflict := b.conflictOf(t, "acme", key, original, attempted)
		rev, _, err := desk.RevealConflict(b.ctx, b.operator.Pool, conflict.ConflictID, "hostile", "")
		require.NoError(t, err)
		require.Equal(t, canonical(t, original), string(rev.Original.Request))
		require.Equal(t, canonical(t, attempted), string(rev.Attempted.Request))
		require.True(t, rev.Original.Fingerprinted)
		require.True(t, rev.Attempted.Fingerprinted)
		require.Empty(t, rev.DiffError)
		return rev
	}

	t.Run("ControlCharactersAndPointerCharacters", func(t *testing.T) {
		rev := reveal(t, "controls",
			`{"a.b":1,"a/b":1,"a":{"b":1},"~1":1,"k\u001b[2J":"\u009b31m","t":"&\t\n\u3000"}`,
			`{"a.b":2,"a/b":2,"a":{"b":2},"~1":2,"k\u001b[2J":"\u009b32m","t":"&\t\n\u3000"}`)
		var paths []string
		for _, d := range rev.Diffs {
			paths = append(paths, d.Path)
		}
		require.ElementsMatch(t, []string{"/intent/a.b", "/intent/a~1b", "/intent/a/b", "/intent/~01", "/intent/k\x1b[2J"}, paths)
	})

	t.Run("DeepNesting", func(t *testing.T) {
		// Near what the library encodes at all (encoding/json stops at
		// 10,000 levels).
		const depth = 9990
		nested := func(leaf string) string {
			return `{"x":` + strings.Repeat("[", depth) + leaf + strings.Repeat("]", depth) + `}`
		}
		rev := reveal(t, "deep", nested("1"), nested("2"))
		require.Len(t, rev.Diffs, 1)
		require.Equal(t, "/intent/x"+strings.Repeat("/0", depth), rev.Diffs[0].Path)
	})

	t.Run("AtTheSizeLimit", func(t *testing.T) {
		// {"intent":{"blob":"…"},"tool":"charge-card","version":"1"} of
		// exactly DefaultMaxIntentBytes.
		pad := ops.DefaultMaxIntentBytes - len(canonical(t, `{"blob":""}`))
		blob := func(last string) string { return `{"blob":"` + strings.Repeat("x", pad-1) + last + `"}` }
		rev := reveal(t, "large", blob("a"), blob("b"))
		require.Len(t, rev.Original.Request, ops.DefaultMaxIntentBytes)
		require.Len(t, rev.Attempted.Request, ops.DefaultMaxIntentBytes)
		require.Len(t, rev.Diffs, 1)
		require.Equal(t, "/intent/blob", rev.Diffs[0].Path)

		// One byte over: refused before anything is recorded.
		var count int
		_, err := ops.DoExternal(b.ctx, b.store, rawReq("acme", "large", blob("bc")), func(context.Context, ops.Attempt) (receipt, error) {
			return receipt{}, errors.New("must not run")
		})
		require.ErrorIs(t, err, ops.ErrInvalidRequest)
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.conflicts WHERE key = 'large'`).Scan(&count))
		require.Equal(t, 1, count)
	})

	t.Run("BadInputIsRefusedAndAudited", func(t *testing.T) {
		_, conflict := b.conflictOf(t, "acme", "input", `{"amount":1}`, `{"amount":2}`)
		// 32 MiB, and escapes and two-byte characters.
		huge, wide := strings.Repeat("x", 32<<20), strings.Repeat("é\"\\\u0001", 256<<10)
		for _, tc := range []struct {
			name        string
			id          int64
			reason, who string
		}{
			{"NoReason", conflict.ConflictID, "", ""},
			{"WhiteSpace", conflict.ConflictID, " \t\n\u3000\u200b", ""},
			{"HugeReason", conflict.ConflictID, huge, ""},
			{"WideName", conflict.ConflictID, "why", wide},
			{"WideReason", conflict.ConflictID, wide, ""},
			{"IdZero", 0, "why", ""},
			{"NegativeId", -conflict.ConflictID, "why", ""},
		} {
			_, res, err := desk.RevealConflict(b.ctx, b.operator.Pool, tc.id, tc.reason, tc.who)
			require.ErrorIs(t, err, reconcile.ErrInvalid, tc.name)
			require.LessOrEqual(t, len(res.Message), 1100, tc.name)
			var row int
			require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT octet_length(a::text) FROM opsdesk.audit a WHERE tenant = $1 AND seq = $2`,
				res.Tenant, res.Seq).Scan(&row), tc.name)
			require.LessOrEqual(t, row, 16<<10, tc.name)
		}
	})
}

// A person's decision left open in the tenant does not stall a reveal,
// and is not ended; a reveal left open in a transaction holds nothing the
// library needs.
func TestRevealConflictBesideOpenDecisions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, conflict := b.conflictOf(t, "acme", "ord-1", `{"amount":1}`, `{"amount":2}`)
	holder := dbtest.NewPerson(t, b.db, "operator", "*")
	ids := b.stuckRecords(t, "acme", 1)
	var outcome string
	end := b.openTx(t, holder, &outcome, `SELECT outcome FROM opsdesk.decide(p_id => $1, p_decision => 'failed',
    p_expect_version => 1, p_reason => 'mine')`, ids[0])
	require.Equal(t, "succeeded", outcome)
	var res reconcile.Result
	quick(t, "a conflict's reveal while another's decision in acme is open", func(ctx context.Context) error {
		var err error
		_, res, err = desk.RevealConflict(ctx, b.operator.Pool, conflict.ConflictID, "what differs", "")
		return err
	})
	require.Positive(t, res.Seq, "the reveal's record is sealed at once")
	require.NoError(t, end(), "the holder's session is still open")

	var entry int64
	rollback := b.openTx(t, b.operator, &entry, `SELECT entry FROM opsdesk.reveal_conflict_request($1, 'kept open')`, conflict.ConflictID)
	b.conflictAfter(t, "whose conflict's reveal is open", "ord-1")
	require.NoError(t, rollback())
}

// A one-tenant operator and a one-tenant admin name conflicts they do not
// see (another tenant's, none at all, the largest id) or no conflict (0,
// negative): refused, audited on the "" chain without the other tenant's
// name, and nothing revealed. A reason the database cannot take (NUL) is
// an error that writes nothing; control characters are kept escaped, not
// raw, in the audit record.
func TestRevealConflictHostileIDsAsOneTenantRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, globex := b.conflictOf(t, "globex", "ord-1", `{"amount":1}`, `{"amount":2}`)
	_, acme := b.conflictOf(t, "acme", "ord-1", `{"amount":1}`, `{"amount":2}`)
	for _, level := range []string{"operator", "admin"} {
		p := dbtest.NewPerson(t, b.db, level, "acme")
		for _, tc := range []struct {
			id   int64
			want error
		}{
			{globex.ConflictID, reconcile.ErrNotFound},
			{math.MaxInt64, reconcile.ErrNotFound},
			{0, reconcile.ErrInvalid},
			{-1, reconcile.ErrInvalid},
			{math.MinInt64, reconcile.ErrInvalid},
		} {
			what := fmt.Sprintf("%s names conflict %d", level, tc.id)
			rev, res, err := desk.RevealConflict(b.ctx, p.Pool, tc.id, "let me see", "")
			require.ErrorIs(t, err, tc.want, what)
			require.Nil(t, rev.Original.Request, what)
			require.Nil(t, rev.Attempted.Request, what)
			require.Empty(t, rev.Diffs, what)
			require.Equal(t, "", res.Tenant, what)
			require.Positive(t, res.Seq, what)
			action, outcome, operationID, details := b.auditOf(t, res)
			require.Equal(t, []string{"reveal:conflict", "failed"}, []string{action, outcome}, what)
			require.Nil(t, operationID, what)
			require.NotContains(t, details, "tenant", what)
			require.NotContains(t, fmt.Sprint(details), "globex", what)
		}

		// A NUL cannot be stored: an error, nothing audited, nothing shown.
		var before int
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.audit`).Scan(&before))
		rev, _, err := desk.RevealConflict(b.ctx, p.Pool, acme.ConflictID, "why\x00not", "")
		require.Error(t, err, level)
		require.Nil(t, rev.Original.Request, level)
		var after int
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.audit`).Scan(&after))
		require.Equal(t, before, after, "%s: a reason with a NUL wrote an audit record", level)

		// Control characters in the reason are kept as typed, trimmed:
		// whatever shows the audit trail cleans them (termtext.Clean).
		rev, res, err := desk.RevealConflict(b.ctx, p.Pool, acme.ConflictID, "why \x1b[2J\u009b31m\r\n", "\x07Bob")
		require.NoError(t, err, level)
		require.NotNil(t, rev.Attempted.Request, level)
		var reason string
		require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT reason FROM opsdesk.audit WHERE tenant = $1 AND seq = $2`,
			res.Tenant, res.Seq).Scan(&reason))
		require.Equal(t, "why \x1b[2J\u009b31m", reason, "%s: trimmed, kept as typed", level)
	}
}

// A connection lost between the audited request and the fetch: an error
// that is no refusal, nothing revealed, and the request, committed and
// audited as succeeded, left unfetched; a minute later it has expired.
func TestRevealConflictConnectionLostBeforeTheFetch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, conflict := b.conflictOf(t, "acme", "ord-1", `{"amount":1}`, `{"amount":2}`)
	pool := dbtest.LosingPool(t, b.db, b.operator, "reveal_conflict_fetch")

	rev, res, err := desk.RevealConflict(b.ctx, pool, conflict.ConflictID, "the line drops", "")
	require.Error(t, err)
	_, refused := errors.AsType[*reconcile.RefusedError](err)
	require.False(t, refused, "a lost connection is no refusal: %v", err)
	require.ErrorContains(t, err, fmt.Sprintf("read the requests of revealed conflict %d (audit record %s)", conflict.ConflictID, res.AuditRef()))
	require.Nil(t, rev.Original.Request)
	require.Nil(t, rev.Attempted.Request)
	require.Empty(t, rev.Diffs)
	action, outcome, _, _ := b.auditOf(t, res)
	require.Equal(t, []string{"reveal:conflict", "succeeded"}, []string{action, outcome}, "audited before the fetch")
	var fetched int
	require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT count(*) FROM opsdesk.reveal_fetches WHERE tenant = $1 AND entry = $2`,
		res.Tenant, res.Entry).Scan(&fetched))
	require.Zero(t, fetched, "the request was marked fetched, yet nothing was read")

	// A minute later the request, unused, fetches nothing. (The
	// superuser ages the audit record of this test's own database, its
	// append-only trigger off for the one statement.)
	tx, err := b.db.Admin.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck // committed below
	_, err = tx.Exec(b.ctx, `ALTER TABLE opsdesk.audit DISABLE TRIGGER audit_no_change`)
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, `UPDATE opsdesk.audit SET at = at - interval '61 seconds' WHERE tenant = $1 AND seq = $2`, res.Tenant, res.Seq)
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, `ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_change`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(b.ctx))
	var v []byte
	err = b.operator.Pool.QueryRow(b.ctx, `SELECT attempted_request FROM opsdesk.reveal_conflict_fetch($1, $2)`, res.Tenant, res.Entry).Scan(&v)
	requireCode(t, err, "42501", "an expired reveal fetched")
	require.ErrorContains(t, err, "in the last minute")
}
