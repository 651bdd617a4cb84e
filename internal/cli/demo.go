package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
)

type demoOptions struct {
	Hold bool
}

func newDemoCmd() *cobra.Command {
	var opts demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the operation store on a throw-away PostgreSQL and show what it does",
		Long: "Start a throw-away PostgreSQL from the server binaries installed on this machine,\n" +
			"migrate it, and run everyday agent tools through the ops library: a replayed retry,\n" +
			"a refused intent change, a provider call taken over safely, and a charge whose\n" +
			"outcome nobody saw left for reconciliation. Everything is removed on exit.\n" +
			"The interactive console arrives in a later release.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&opts.Hold, "hold", false, "keep the database running until interrupted, to explore it with psql")
	return cmd
}

// demoRole is the login role the demo's service connects as.
const demoRole = "opsdesk_demo_service"

func runDemo(ctx context.Context, opts demoOptions, w io.Writer) (err error) {
	fmt.Fprintln(w, "starting a throw-away PostgreSQL...")
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if serr := cluster.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()

	admin, err := pgx.Connect(ctx, cluster.DSN("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `CREATE DATABASE opsdesk`); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	ownerCfg, err := pgx.ParseConfig(cluster.DSN("opsdesk"))
	if err != nil {
		return err
	}
	res, err := db.Migrate(ctx, ownerCfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "schema migrated to version %d in %s\n\n", res.To, cluster.Dir())

	owner, err := pgx.ConnectConfig(ctx, ownerCfg)
	if err != nil {
		return err
	}
	defer owner.Close(context.WithoutCancel(ctx))
	if _, err := owner.Exec(ctx, demo.Schema+`
CREATE ROLE `+demoRole+` LOGIN IN ROLE opsdesk_service;`); err != nil {
		return fmt.Errorf("prepare demo tables: %w", err)
	}

	poolCfg, err := db.PoolConfig(cluster.DSN("opsdesk")+" user="+demoRole, "opsdesk demo")
	if err != nil {
		return err
	}
	pool, err := db.Open(ctx, poolCfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := demo.Run(ctx, w, pool); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	if !opts.Hold {
		fmt.Fprintln(w, "\nthe database is removed now; run `opsdesk demo --hold` to explore it with psql.")
		return nil
	}
	fmt.Fprintf(w, "\nexplore with:  psql %q\npress ctrl-c to stop and remove it\n", cluster.DSN("opsdesk"))
	<-ctx.Done()
	fmt.Fprintln(w, "stopping...")
	return nil
}
