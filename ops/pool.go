package ops

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is what a Store needs of its database: the statements it sends on
// its own, the transactions it begins (DoTx's and RecordPolicies'), and a
// connection held for a reservation's whole step. *pgxpool.Pool
// satisfies it; a service may wrap one (to trace or count) without
// handing the Store the pool itself.
type Pool interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
	Begin(ctx context.Context) (pgx.Tx, error)
	BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var _ Pool = (*pgxpool.Pool)(nil)
