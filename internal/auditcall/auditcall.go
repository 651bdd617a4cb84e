// Package auditcall calls the database's audited functions and scans
// their answer into an audited.Result, and is the one mapping of the
// database's errors by named SQLSTATE (pgerrcode): every package that
// tells a PostgreSQL error apart asks SQLState.
package auditcall

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/opsdesk/opsdesk/internal/audited"
)

// RowQuerier runs a query that returns one row (a pool, a connection, a
// transaction).
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Call runs sql, a call of one of the functions answering
// opsdesk.decision_result, and scans its answer; a refusal is a
// *RefusedError beside its Result. An error of the database's is
// MapError's, grant naming the group role the caller needs. The audit
// record is left queued: the caller seals once the call has committed.
func Call(ctx context.Context, q RowQuerier, grant, sql string, args ...any) (audited.Result, error) {
	var (
		outcome, tenant      string
		code, message, state *string
		entry, version       *int64
	)
	if err := q.QueryRow(ctx, sql, args...).Scan(&outcome, &code, &message, &tenant, &entry, &state, &version); err != nil {
		return audited.Result{}, MapError(err, grant)
	}
	r := audited.Result{Outcome: audited.Outcome(outcome), Tenant: tenant, Code: deref(code), Message: deref(message), State: deref(state),
		Entry: value(entry), Version: value(version)}
	return r, r.Err()
}

// SQLState is the PostgreSQL error code of err ("" when it is not the
// server's error): compare it with pgerrcode's names.
func SQLState(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code
	}
	return ""
}

// MapError turns a missing privilege (a role without the group role the
// function is granted to cannot even call it, and its attempt leaves no
// trace) into ErrNotPermitted, naming grant; other errors stay as they
// are.
func MapError(err error, grant string) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgerrcode.InsufficientPrivilege {
		return fmt.Errorf("%w: %s (is the role granted %s? see opsdesk access grant)", audited.ErrNotPermitted, pgErr.Message, grant)
	}
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func value(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
