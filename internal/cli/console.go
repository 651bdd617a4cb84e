package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/audit"
	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/retention"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/reconcile/desk"
	"github.com/opsdesk/opsdesk/ui"
)

// The console is handed the database's readers and writers behind its
// interfaces; the assertions are here, where they meet, so that ui names
// none of them and does not depend on pgx.
var (
	_ ui.Source  = (*storeview.Store)(nil)
	_ ui.Decider = (*desk.Desk)(nil)
	_ ui.Purger  = (*retention.Purger)(nil)
)

// runConsole opens the console on the configured context, on the screen
// goTo names (a : command, checked before anything starts). An unreachable
// database is shown (and retried) inside the console; a reachable database
// whose schema is behind or ahead of this opsdesk is refused before it opens.
func runConsole(cmd *cobra.Command, g *globalFlags, goTo string) error {
	if cmd.Flags().Changed("goto") {
		if _, err := ui.CheckCommand(goTo); err != nil {
			return usagef("--goto: %w", err)
		}
	}
	cfg, err := loadConfig(cmd, g)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	view, pool, err := openConsoleView(ctx, cfg.Context)
	if err != nil {
		return err
	}
	defer pool.Close()
	var writes *pgxpool.Pool
	if !cfg.Context.ReadOnly {
		writes, err = openConsoleWriter(ctx, cfg.Context)
		if err != nil {
			return err
		}
		defer writes.Close()
	}
	opts, err := consoleOptions(withRecordedPolicies(ctx, view, cfg), writes)
	if err != nil {
		return err
	}
	opts.Goto = goTo
	opts.Verifier = consoleVerifier{pool: pool}
	opts.Report = cmd.ErrOrStderr() // what a run left half-done, after the console
	return ui.Run(ctx, view, opts)
}

// consoleVerifier runs opsdesk audit verify's check of every chain the
// person's role may see, for the console's :verify, over the console's
// read pool.
type consoleVerifier struct{ pool *pgxpool.Pool }

// Verify checks the chains, reporting its progress. The check reads every
// chain in one snapshot, as long as that takes: the connection it borrows
// drops the console's statement timeout while it runs.
func (v consoleVerifier) Verify(ctx context.Context, progress func(auditreport.Progress)) (*auditreport.Report, error) {
	conn, err := v.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("verify audit: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
		return nil, fmt.Errorf("verify audit: %w", err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "RESET statement_timeout"); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) //nolint:errcheck // the pool drops a closed connection
		}
	}()
	return audit.Verify(ctx, conn, audit.VerifyOpts{Progress: progress})
}

// consoleOptions are the console's settings for a context; writes, when
// not nil, is the pool its decisions and purges go through.
func consoleOptions(cfg *config.Config, writes *pgxpool.Pool) (ui.Config, error) {
	opts := ui.Config{
		Context:  cfg.Context.Name,
		ReadOnly: cfg.Context.ReadOnly,
		Refresh:  cfg.Context.Refresh,
		Timeout:  statementTimeout,
		Catalog:  ReviewCatalog(cfg),
	}
	if cfg.Context.Keyring != nil {
		opts.RevealKeys = cfg.Context.Keyring
	}
	if writes != nil {
		desk := newDesk(writes, cfg)
		// A connection to each provider per lookup in flight, for R.
		desk.Client = bulk.HTTPClient(bulk.DefaultConcurrency)
		opts.Decider = desk
		opts.Purger = &retention.Purger{Pool: writes, TombstoneFor: tombstoneLifetimes(cfg), DisplayName: cfg.Context.DisplayName}
		// R lists over the writes' pool, as the person, with the
		// console's store settings: the versions it lists are the
		// primary's, the ones its decisions expect (a read replica's
		// could lag behind).
		r, err := bulk.New(bulk.Config{Desk: desk, Lister: newView(writes, cfg.Context)})
		if err != nil {
			return opts, fmt.Errorf("bulk reconciliation: %w", err)
		}
		opts.Bulk = r
	}
	return opts, nil
}

// openConsoleWriter is the pool the console's decisions go through, as the
// person's own role: the context's DSN, never its read DSN (a replica
// cannot write, and a decision must meet the version on the primary). It
// connects lazily, like the console's reads, so the console opens on a
// database that is down; the console asks the role's capabilities once
// connected and offers nothing the database would refuse.
func openConsoleWriter(ctx context.Context, c config.Context) (*pgxpool.Pool, error) {
	poolCfg, err := writePoolConfig(c)
	if err != nil {
		return nil, err
	}
	poolCfg.MinConns = 0
	// R decides up to bulk.DefaultConcurrency records at once, each on a
	// connection of its own; the pool opens them only when asked.
	poolCfg.MaxConns = max(poolCfg.MaxConns, bulk.DefaultConcurrency)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	return pool, nil
}

// openConsoleView is openView without the connection check: the pool
// connects lazily, so the console can open on a database that is down and
// say so.
func openConsoleView(ctx context.Context, c config.Context) (*storeview.Store, *pgxpool.Pool, error) {
	poolCfg, err := viewPoolConfig(c)
	if err != nil {
		return nil, nil, err
	}
	poolCfg.MinConns = 0
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("create pool: %w", err)
	}
	checkCtx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	if _, err := db.CheckSchema(checkCtx, pool); errors.Is(err, db.ErrSchemaBehind) || errors.Is(err, db.ErrSchemaAhead) {
		pool.Close()
		return nil, nil, err
	}
	return newView(pool, c), pool, nil
}
