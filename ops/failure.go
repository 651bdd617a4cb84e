package ops

import (
	"context"
	"errors"
	"github.com/jackc/pgerrcode"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// How a failed statement is classified (see the sentinels' comment): by
// what the database may have done, which depends on where the statement ran.
//
// Inside DoTx's transaction nothing commits before COMMIT, so a failure of
// any earlier statement wrote nothing: notWritten. A COMMIT, and a write
// outside a transaction (DoExternal's), may have committed even though it
// failed, when its answer was lost on the way: mayHaveCommitted tells.

// notWritten classifies the failure of a statement that cannot have
// committed anything: ErrStoreRefused when the server refused it for a reason a
// retry does not cure, ErrUnavailable otherwise.
func notWritten(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !transient(pgErr.Code) {
		return &StoreRefusedError{SQLState: pgErr.Code, Err: err}
	}
	return &UnavailableError{Err: err}
}

// transient tells whether a server error is one a later attempt may not
// meet: the connection or server went away, a conflict with a concurrent
// transaction, exhausted resources, a timeout.
func transient(code string) bool {
	switch {
	case pgerrcode.IsConnectionException(code),
		pgerrcode.IsTransactionRollback(code),   // serialization_failure, deadlock_detected…
		pgerrcode.IsInsufficientResources(code): // too_many_connections, disk_full…
		return true
	}
	switch code {
	case pgerrcode.AdminShutdown, // the server stopped or the backend was terminated
		pgerrcode.CrashShutdown,
		pgerrcode.CannotConnectNow, // starting up or shutting down
		pgerrcode.IdleSessionTimeout,
		pgerrcode.QueryCanceled,          // statement_timeout or a cancel request
		pgerrcode.LockNotAvailable,       // lock_timeout
		pgerrcode.ReadOnlySQLTransaction, // a standby, as during a failover
		pgerrcode.IdleInTransactionSessionTimeout,
		pgerrcode.SystemError,
		pgerrcode.IOError:
		return true
	}
	return false
}

// mayHaveCommitted tells whether a write that failed outside a transaction,
// or a COMMIT that failed, may have committed all the same. answered says
// whether part of the statement's answer (its returned row) arrived before
// the failure.
func mayHaveCommitted(err error, answered bool) bool {
	var connErr *pgconn.ConnectError
	if pgconn.SafeToRetry(err) || errors.As(err, &connErr) {
		return false // nothing was sent
	}
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return false // the server answered the COMMIT with a rollback
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true // the answer was lost on the way
	}
	severity := pgErr.SeverityUnlocalized
	if severity == "" {
		severity = pgErr.Severity
	}
	switch {
	case severity == "ERROR":
		// An error ends the statement, and the transaction it would have
		// committed, without effect: once a commit is durable, the server
		// reports no error about it.
		return false
	case pgErr.Code == pgerrcode.CrashShutdown:
		// A crash: the backend may have died with its answer unsent.
		return true
	default:
		// FATAL: the session ends. The server sends what it had written
		// before the error, and commits only after the statement finished,
		// so a write that had not answered did not commit.
		return answered
	}
}

// fromDatabase tells whether an error of DoTx's fn came from the database or
// the connection to it (rather than from fn's own logic), so that it gets a
// class like the library's own statements.
func fromDatabase(err error) bool {
	var (
		pgErr     *pgconn.PgError
		connErr   *pgconn.ConnectError
		netErr    net.Error
		retrySafe interface{ SafeToRetry() bool }
	)
	return errors.As(err, &pgErr) || errors.As(err, &connErr) || errors.As(err, &netErr) ||
		errors.As(err, &retrySafe) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// classified tells whether err already matches one of the library's
// sentinels, so that it is not wrapped in a second one.
func classified(err error) bool {
	for _, sentinel := range []error{ErrUnavailable, ErrStoreRefused, ErrOutcomeUnknown, ErrNotRecorded,
		ErrInProgress, ErrIntentConflict, ErrNeedsReconciliation, ErrRejected, ErrLostOwnership,
		ErrNotApplied, ErrExpired, ErrInvalidRequest, ErrUnknownTool, ErrWrongEffect} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}

// fnFailed is the error DoTx returns for an error of fn's: a database
// failure gets its class (the transaction rolls back, so nothing was
// written); fn's own errors are returned as they are.
func fnFailed(err error) error {
	if classified(err) || !fromDatabase(err) {
		return err
	}
	return notWritten(err)
}

// writeContext returns the context a write through q runs under. Inside a
// transaction it is ctx: cancelling it rolls everything back. Outside one, a
// write that a cancellation cuts short may commit all the same, and the
// library could no longer tell: the caller's cancellation is honoured before
// the write is sent (err is then ctx's error) and not while it runs, which
// writeTimeout bounds instead.
func writeContext(ctx context.Context, q dbtx) (context.Context, context.CancelFunc, error) {
	if _, inTx := q.(pgx.Tx); inTx {
		return ctx, func() {}, nil
	}
	return shielded(ctx)
}

// shielded returns ctx's error if it is done, else a context for a write
// that keeps ctx's values but not its cancellation, bounded by writeTimeout.
func shielded(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	return wctx, cancel, nil
}

// writeFailed classifies a write through q that failed: nothing written, or
// (outside a transaction, when it may have committed) what unknown makes of
// the error.
func writeFailed(q dbtx, err error, answered bool, unknown func(error) error) error {
	if _, inTx := q.(pgx.Tx); inTx || !mayHaveCommitted(err, answered) {
		return notWritten(err)
	}
	return unknown(err)
}

// writeTimeout bounds a write that runs even when the caller's context is
// done: one whose outcome the record must say (an external call's), or one
// that, cut short, might commit without the library knowing.
const writeTimeout = 15 * time.Second
