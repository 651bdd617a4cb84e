package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/ops/opsmigrate"
)

type migrateOptions struct {
	DSN string
}

func newMigrateCmd() *cobra.Command {
	var opts migrateOptions
	cmd := &cobra.Command{
		Use:   "migrate --dsn DSN",
		Short: "Install or upgrade the opsdesk schema",
		Long: "Install or upgrade the opsdesk schema (schema opsdesk, role opsdesk_service) in the\n" +
			"database DSN names, and print the version reached. Safe to run again and from\n" +
			"several processes at once. Connect as a superuser, or as the database's owner\n" +
			"with CREATEROLE (the first run creates the role opsdesk_service).",
		Example: "  opsdesk migrate --dsn 'postgres://admin@db.example.com/opsdesk'",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMigrate(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&opts.DSN, "dsn", "", "PostgreSQL connection string (URL or key=value); required")
	return cmd
}

// runMigrate migrates, says to what version, and warns on stderr about the
// logins that can bypass what the schema enforces.
func runMigrate(ctx context.Context, opts migrateOptions, stdout, stderr io.Writer) error {
	if strings.TrimSpace(opts.DSN) == "" {
		return usagef("--dsn is required: the database to migrate, for example --dsn 'postgres://admin@localhost/opsdesk'")
	}
	pool, err := openDSN(ctx, opts.DSN, "opsdesk migrate")
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := opsmigrate.Migrate(ctx, pool, nil)
	if err != nil {
		return err
	}
	if len(res.Applied) == 0 {
		_, err = fmt.Fprintf(stdout, "schema already at version %d\n", res.To)
	} else {
		_, err = fmt.Fprintf(stdout, "schema migrated from version %d to %d (%s)\n", res.From, res.To, strings.Join(res.Applied, ", "))
	}
	warnPrivileged(ctx, storeview.New(pool, storeview.Config{}), stderr)
	return err
}

// openDSN opens a small pool on the database a --dsn flag names.
func openDSN(ctx context.Context, dsn, application string) (*pgxpool.Pool, error) {
	cfg, err := db.PoolConfig(dsn, application)
	if err != nil {
		return nil, usagef("--dsn: %w", err)
	}
	cfg.MaxConns = 2
	return db.Open(ctx, cfg)
}
