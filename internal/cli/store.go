package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

// statementTimeout bounds every console and command query.
const statementTimeout = 5 * time.Second

// globalFlags are the flags every store command shares; config.Load reads
// the ones the user set.
type globalFlags struct {
	configFile string
	context    string
}

func addGlobalFlags(fs *pflag.FlagSet, g *globalFlags) {
	fs.StringVar(&g.configFile, "config", "", "config file (default $OPSDESK_CONFIG, else $XDG_CONFIG_HOME/opsdesk/config.yaml)")
	fs.StringVar(&g.context, "context", "", "context to use from the config file (default $OPSDESK_CONTEXT, else current_context)")
	fs.String("dsn", "", "operation store DSN, overriding the context's ($OPSDESK_DSN)")
	fs.String("read-dsn", "", "DSN for reads, such as a replica ($OPSDESK_READ_DSN)")
	fs.Bool("libpq-env", false, "take the connection from libpq's environment (PGHOST, PGDATABASE, …)")
	fs.Bool("read-only", false, "disable every write ($OPSDESK_READ_ONLY)")
	fs.Duration("refresh", 0, "console refresh interval ($OPSDESK_REFRESH, default 2s)")
	fs.Duration("stuck-after", 0, "count a pending record as stuck this long after its lease expired ($OPSDESK_STUCK_AFTER)")
}

// loadConfig resolves the configuration; its errors are usage errors.
func loadConfig(cmd *cobra.Command, g *globalFlags) (*config.Config, error) {
	cfg, err := config.Load(config.Options{File: g.configFile, Context: g.context, Flags: cmd.Flags()})
	if err != nil {
		return nil, &usageError{err: err}
	}
	return cfg, nil
}

// openView connects to the context's read DSN (or its DSN) with the
// console's settings, checks the schema, and returns the read store.
func openView(ctx context.Context, c config.Context) (*storeview.Store, *pgxpool.Pool, error) {
	poolCfg, err := viewPoolConfig(c)
	if err != nil {
		return nil, nil, err
	}
	pool, err := openChecked(ctx, poolCfg)
	if err != nil {
		return nil, nil, err
	}
	return newView(pool, c), pool, nil
}

// openChecked connects and refuses a schema this opsdesk does not know.
func openChecked(ctx context.Context, poolCfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := db.Open(ctx, poolCfg)
	if err != nil {
		return nil, err
	}
	if _, err := db.CheckSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// viewPoolConfig is the pool for a context's reads: its read DSN (a
// replica) when it has one, named opsdesk, with a statement timeout.
func viewPoolConfig(c config.Context) (*pgxpool.Config, error) {
	dsn := c.DSN
	if c.ReadDSN != "" {
		dsn = c.ReadDSN
	}
	poolCfg, err := db.PoolConfig(dsn, "opsdesk")
	if err != nil {
		return nil, &usageError{err: fmt.Errorf("context %s: %w", c.Name, err)}
	}
	storeview.ConfigurePool(poolCfg, statementTimeout)
	poolCfg.MaxConns = 4
	return poolCfg, nil
}

// writePoolConfig is the pool for a person's writes, and for reads that
// must see the primary: the context's DSN, never its read DSN (a replica
// cannot write, and may lag behind).
func writePoolConfig(c config.Context) (*pgxpool.Config, error) {
	poolCfg, err := db.PoolConfig(c.DSN, "opsdesk")
	if err != nil {
		return nil, &usageError{err: fmt.Errorf("context %s: %w", c.Name, err)}
	}
	storeview.ConfigurePool(poolCfg, statementTimeout)
	poolCfg.MaxConns = writerConns
	return poolCfg, nil
}

// writerConns is a writer's pool size.
const writerConns = 2

func newView(pool *pgxpool.Pool, c config.Context) *storeview.Store {
	return storeview.New(pool, storeview.Config{StuckAfter: c.StuckAfter, StatementTimeout: statementTimeout})
}
