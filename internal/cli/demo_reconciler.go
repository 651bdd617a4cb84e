package cli

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/reconcile/auto"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/reconcile/desk"
)

// The demo owns its store, so its admin (demoOperator) lets reconcilers
// decide charge-card on both definite lookup answers when it starts: the
// catalog it writes asks for that (auto_reconcile), and a reconciler's
// login on it (the demo's own, or one a script grants) is then let.

// demoReconciler is the login role of the demo's own reconciler.
const demoReconciler = "opsdesk_demo_reconciler"

// demoReconcilerInterval is the demo reconciler's cycle.
const demoReconcilerInterval = 5 * time.Second

// allowDemoReconciler writes the store's allowlist for the demo's
// auto-reconciled tool, as demoOperator, audited.
func allowDemoReconciler(ctx context.Context, operatorDSN string) error {
	cfg, err := db.PoolConfig(operatorDSN, "opsdesk demo")
	if err != nil {
		return err
	}
	cfg.MaxConns = 1
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = desk.SetAutoReconcile(ctx, pool, demo.AutoReconciled, config.AutoReconcileVerdicts,
		"opsdesk demo: the demo owns its store, and its provider answers charge-card lookups", "demo operator")
	if err != nil {
		return fmt.Errorf("let reconcilers decide %s: %w", demo.AutoReconciled, err)
	}
	return nil
}

// startDemoReconciler creates the demo reconciler's login (granted the
// reconciler level by demoOperator, audited) and runs a pass every
// demoReconcilerInterval over the catalog's auto_reconcile tools, each
// pass's line written to logTo. stop stops it after the decisions in
// flight.
func startDemoReconciler(ctx context.Context, cluster *pgcluster.Cluster, operatorDSN, catalog string, logTo io.Writer) (stop func(), err error) {
	conn, err := pgx.Connect(ctx, cluster.DSN(demoDatabase))
	if err != nil {
		return nil, err
	}
	password, err := demoLogin(ctx, conn, demoReconciler)
	_ = conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	opCfg, err := db.PoolConfig(operatorDSN, "opsdesk demo")
	if err != nil {
		return nil, err
	}
	opCfg.MaxConns = 1
	op, err := db.Open(ctx, opCfg)
	if err != nil {
		return nil, err
	}
	_, err = desk.GrantAccess(ctx, op, demoReconciler, "reconciler", "*", "opsdesk demo: its reconciler", "demo operator")
	op.Close()
	if err != nil {
		return nil, fmt.Errorf("grant %s the reconciler level: %w", demoReconciler, err)
	}

	cfg, err := config.Load(config.Options{File: catalog, Context: "demo"})
	if err != nil {
		return nil, fmt.Errorf("read the demo's catalog: %w", err)
	}
	cfg.Context.DisplayName = "demo reconciler"
	poolCfg, err := db.PoolConfig(demoDSN(cluster, demoDatabase, demoReconciler)+" password="+password, "opsdesk demo reconciler")
	if err != nil {
		return nil, err
	}
	storeview.ConfigurePool(poolCfg, statementTimeout)
	poolCfg.MaxConns = int32(auto.DefaultConcurrency + 2)
	pool, err := db.Open(ctx, poolCfg)
	if err != nil {
		return nil, err
	}
	view := storeview.New(pool, storeview.Config{StatementTimeout: statementTimeout})
	cfg = withRecordedPolicies(ctx, view, cfg) // the services' retentions, as every command decides by
	w := &writer{cfg: cfg, pool: pool, view: view, desk: newDesk(pool, cfg)}
	client := bulk.HTTPClient(auto.DefaultConcurrency)
	w.desk.Client = client
	bk, err := bulk.New(bulk.Config{Desk: w.desk, Lister: w.view, Concurrency: auto.DefaultConcurrency})
	if err != nil {
		pool.Close()
		return nil, err
	}
	r, err := auto.New(auto.Config{Bulk: bk, Desk: w.desk, Lister: w.view, Settings: storeSettings(w), Tools: autoTools(cfg)})
	if err != nil {
		pool.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			rep, err := r.Pass(ctx)
			switch {
			case ctx.Err() != nil:
			case err != nil:
				fmt.Fprintln(logTo, "demo reconciler: pass failed:", err)
			case rep.Listed > 0 || rep.Paused:
				writePass(logTo, rep, false)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(demoReconcilerInterval):
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		client.CloseIdleConnections()
		pool.Close()
	}, nil
}
