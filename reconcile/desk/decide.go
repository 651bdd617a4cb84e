package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/auditcall"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
)

// Decide applies one decision through opsdesk.decide, connected as the
// deciding person. A refusal is a *RefusedError; its audit record is
// committed.
func Decide(ctx context.Context, pool *pgxpool.Pool, p reconcile.DecideParams) (reconcile.Result, error) {
	retention := p.Retention
	if retention == 0 {
		retention = ops.DefaultRetention
	}
	var snooze pgtype.Timestamptz
	if !p.SnoozeUntil.IsZero() {
		snooze = pgtype.Timestamptz{Time: p.SnoozeUntil, Valid: true}
	}
	var snoozeFor *int64 // NULL: no snooze but SnoozeUntil's
	if snooze.Time.IsZero() && p.SnoozeFor != 0 {
		us := p.SnoozeFor.Microseconds()
		snoozeFor = &us
	}
	if p.Batch != "" && !reconcile.IsUUID(p.Batch) {
		return reconcile.Result{}, fmt.Errorf("%w: batch id %q is not a UUID", reconcile.ErrInvalid, p.Batch)
	}
	var result []byte // nil is SQL NULL
	if len(p.Result) > 0 {
		if !json.Valid(p.Result) {
			return reconcile.Result{}, fmt.Errorf("%w: the result is not valid JSON", reconcile.ErrInvalid)
		}
		result = p.Result
	}
	do := call
	if p.SealLater {
		do = callUnsealed
	}
	return do(ctx, pool, `
SELECT (r).* FROM opsdesk.decide(
    p_id => $1, p_decision => $2, p_expect_version => $3, p_reason => $4,
    p_result_ref => $5, p_result => $6, p_evidence_digest => $7, p_evidence_summary => $8,
    p_lookup => $9, p_force => $10, p_override => $11,
    p_retention => $12 * interval '1 microsecond', p_snooze_until => coalesce($13, now() + $17 * interval '1 microsecond'), p_display_name => $14,
    p_lookup_ref => $15, p_batch => $16::uuid) r`,
		p.OperationID, string(p.Decision), p.ExpectVersion, p.Reason,
		nullable(p.ResultRef), result, nullable(p.Evidence.Digest), nullable(p.Evidence.Summary),
		nullable(string(p.Evidence.Lookup)), p.Force, p.Override,
		retention.Microseconds(), snooze, nullable(p.DisplayName), nullable(p.Evidence.Ref), nullable(p.Batch), snoozeFor)
}

// StartBatch records a run about to decide, planned from filter, for the
// connected login (opsdesk.start_batch), and returns its batch id: the
// one the run's decisions pass (DecideParams.Batch). A login that may not
// decide gets ErrNotPermitted, a bad filter ErrInvalid.
func StartBatch(ctx context.Context, pool *pgxpool.Pool, filter, displayName string) (string, error) {
	if err := reconcile.CheckBatchFilter(filter); err != nil {
		return "", err
	}
	var id string
	err := pool.QueryRow(ctx, `SELECT opsdesk.start_batch($1, $2)::text`, filter, nullable(displayName)).Scan(&id)
	switch auditcall.SQLState(err) {
	case "":
	case pgerrcode.InvalidParameterValue, pgerrcode.CharacterNotInRepertoire, pgerrcode.UntranslatableCharacter:
		return "", fmt.Errorf("start a run: %w: %s", reconcile.ErrInvalid, pgMessage(err))
	default:
		// A role without opsdesk_viewer cannot call the function; one that
		// may not decide is refused by it: both are ErrNotPermitted.
		return "", fmt.Errorf("start a run: %w", auditcall.MapError(err, grant))
	}
	if err != nil {
		return "", fmt.Errorf("start a run: %w", err)
	}
	return id, nil
}

// pgMessage is the server's message of err.
func pgMessage(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Message
	}
	return err.Error()
}

// AckConflicts marks record id's unreviewed conflicting attempts among
// seen (the ones the person looked at) as reviewed by the connected
// person; conflicts that arrived since stay unreviewed.
func AckConflicts(ctx context.Context, pool *pgxpool.Pool, id int64, seen []int64, reason, displayName string) (reconcile.Result, error) {
	return call(ctx, pool, `SELECT (r).* FROM opsdesk.ack_conflicts($1, $2, $3, $4) r`, id, seen, reason, nullable(displayName))
}

// Reveal returns record id's stored intent or result. It takes two
// transactions: the first audits the reveal and commits; only then does
// the second read the value (the database refuses to hand it out any
// other way), so nobody sees one without a trace.
func Reveal(ctx context.Context, pool *pgxpool.Pool, id int64, field reconcile.Field, reason, displayName string) (json.RawMessage, reconcile.Result, error) {
	res, err := requestReveal(ctx, pool, id, field, reason, displayName)
	if err != nil {
		return nil, res, err
	}
	var value []byte
	if err := pool.QueryRow(ctx, `SELECT opsdesk.reveal_fetch($1, $2)`, res.Tenant, res.Entry).Scan(&value); err != nil {
		return nil, res, fetchError(field, res, err)
	}
	return value, res, nil
}

// RevealStart is Reveal for a screen: it returns at most the first
// maxBytes bytes of the value's text and the whole text's size, cut by
// the database, so that a stored value of any size costs no more than
// maxBytes to fetch and to show. It is audited like Reveal.
func RevealStart(ctx context.Context, pool *pgxpool.Pool, id int64, field reconcile.Field, reason, displayName string, maxBytes int) (reconcile.Revealed, reconcile.Result, error) {
	res, err := requestReveal(ctx, pool, id, field, reason, displayName)
	if err != nil {
		return reconcile.Revealed{}, res, err
	}
	var (
		text *string
		size *int64
	)
	// One call of reveal_fetch (a request gives one fetch), cut as text:
	// left counts characters, so at most four bytes each.
	err = pool.QueryRow(ctx, `WITH v AS MATERIALIZED (SELECT opsdesk.reveal_fetch($1, $2)::text AS t)
SELECT left(t, $3), octet_length(t) FROM v`, res.Tenant, res.Entry, max(0, maxBytes)).Scan(&text, &size)
	if err != nil {
		return reconcile.Revealed{}, res, fetchError(field, res, err)
	}
	if text == nil {
		return reconcile.Revealed{}, res, nil
	}
	return reconcile.Revealed{Text: []byte(cutUTF8(*text, maxBytes)), Size: *size}, res, nil
}

// revealSlice is how much of a value RevealTo reads at a time.
const revealSlice = 1 << 20

// RevealTo is Reveal for a command that prints the value whole: it
// writes the value's JSON text to w as the database reads it out, in
// slices that each end on a character boundary, so that a stored value of
// any size costs a slice of memory instead of the whole value and its
// copies. Nothing is written when nothing was stored. It is audited like
// Reveal; an error after the first slice leaves w with part of the value.
func RevealTo(ctx context.Context, pool *pgxpool.Pool, id int64, field reconcile.Field, reason, displayName string, w io.Writer) (reconcile.Result, error) {
	res, err := requestReveal(ctx, pool, id, field, reason, displayName)
	if err != nil {
		return res, err
	}
	// One call of reveal_fetch (a request gives one fetch), its text as
	// bytes so that each slice is found by its offset, not by counting
	// characters from the start. Each row says where its slice starts, so
	// that slices out of order are an error, never a value misprinted.
	rows, err := pool.Query(ctx, `WITH v AS MATERIALIZED (SELECT convert_to(opsdesk.reveal_fetch($1, $2)::text, 'UTF8') AS b)
SELECT s, substring(v.b FROM s FOR $3) FROM v CROSS JOIN LATERAL generate_series(1, octet_length(v.b), $3) AS s`,
		res.Tenant, res.Entry, revealSlice)
	if err != nil {
		return res, fetchError(field, res, err)
	}
	defer rows.Close()
	var (
		at int64 = 1
		// The slice as the driver read it, valid until the next row: a
		// value is never copied whole, slice by slice.
		slice pgtype.DriverBytes
		carry []byte // the start of a character the slice cut
	)
	for rows.Next() {
		var start int64
		if err := rows.Scan(&start, &slice); err != nil {
			return res, fetchError(field, res, err)
		}
		if start != at {
			return res, fetchError(field, res, fmt.Errorf("slice at byte %d came where byte %d was due", start, at))
		}
		at += int64(len(slice))
		buf := []byte(slice)
		if len(carry) > 0 {
			buf = append(carry, slice...)
		}
		n := len(buf)
		for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
			if utf8.RuneStart(buf[i]) {
				if !utf8.FullRune(buf[i:]) {
					n = i
				}
				break
			}
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return res, err
		}
		carry = append([]byte(nil), buf[n:]...)
	}
	if err := rows.Err(); err != nil {
		return res, fetchError(field, res, err)
	}
	if len(carry) > 0 {
		if _, err := w.Write(carry); err != nil {
			return res, err
		}
	}
	return res, nil
}

// cutUTF8 is the longest prefix of s within n bytes that ends on a
// character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func requestReveal(ctx context.Context, pool *pgxpool.Pool, id int64, field reconcile.Field, reason, displayName string) (reconcile.Result, error) {
	return call(ctx, pool, `SELECT * FROM opsdesk.reveal_request($1, $2, $3, $4)`,
		id, string(field), reason, nullable(displayName))
}

func fetchError(field reconcile.Field, res reconcile.Result, err error) error {
	return fmt.Errorf("read the revealed %s (audit record %s): %w", field, res.AuditRef(), mapError(err))
}

// GrantAccess makes login role role a viewer, operator or admin of tenant
// ("*": every tenant), replacing the level it had. An empty level revokes
// all of its access.
func GrantAccess(ctx context.Context, pool *pgxpool.Pool, role, level, tenant, reason, displayName string) (reconcile.Result, error) {
	return call(ctx, pool, `SELECT (r).* FROM opsdesk.grant_access($1, $2, $3, $4, $5) r`,
		role, nullable(level), nullable(tenant), reason, nullable(displayName))
}

// call runs one of the functions, one statement in a transaction of its
// own, which commits refusal or not: a refusal's audit record must stay.
// Then it seals the trail and reads the record's place in its chain.
func call(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (reconcile.Result, error) {
	r, err := callUnsealed(ctx, pool, sql, args...)
	if r.Entry != 0 {
		r.Seq = audit.SealedSeq(ctx, pool, r.Tenant, r.Entry)
	}
	if err != nil {
		var refused *reconcile.RefusedError
		if errors.As(err, &refused) {
			refused.Result = r
		}
	}
	return r, err
}

// callUnsealed is call without the seal: the result names its entry.
func callUnsealed(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (reconcile.Result, error) {
	return auditcall.Call(ctx, pool, grant, sql, args...)
}

// grant is the group role people's functions are for.
const grant = "opsdesk_operator"

// SealResults seals the trail as its own transaction and gives each of
// results (the connected role's, as a bulk run keeps them) the sequence
// number of its entry, where the role may see it; one still queued keeps
// Seq 0.
func SealResults(ctx context.Context, pool *pgxpool.Pool, results []*reconcile.Result) error {
	if _, err := audit.Seal(ctx, pool, "", 0); err != nil {
		return err
	}
	var tenants []string
	var entries []int64
	for _, r := range results {
		if r.Entry != 0 && r.Seq == 0 {
			tenants, entries = append(tenants, r.Tenant), append(entries, r.Entry)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	rows, err := pool.Query(ctx, `SELECT a.tenant, a.entry, a.seq FROM opsdesk.audit a
JOIN unnest($1::text[], $2::bigint[]) e (tenant, entry) ON a.tenant = e.tenant AND a.entry = e.entry
WHERE a.role = session_user`, tenants, entries)
	if err != nil {
		return fmt.Errorf("read the sealed audit records: %w", err)
	}
	type ref struct {
		tenant string
		entry  int64
	}
	seqs := map[ref]int64{}
	var t string
	var e, seq int64
	if _, err := pgx.ForEachRow(rows, []any{&t, &e, &seq}, func() error { seqs[ref{t, e}] = seq; return nil }); err != nil {
		return fmt.Errorf("read the sealed audit records: %w", err)
	}
	for _, r := range results {
		if seq, ok := seqs[ref{r.Tenant, r.Entry}]; ok && r.Seq == 0 {
			r.Seq = seq
		}
	}
	return nil
}

// mapError is auditcall.MapError for people's functions.
func mapError(err error) error { return auditcall.MapError(err, grant) }

func nullable(s string) *string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
