package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/ops"
)

// OutageConfig configures Outage.
type OutageConfig struct {
	// Pool reaches the operation store as a role granted opsdesk_service.
	Pool *pgxpool.Pool
	// Provider is the simulated provider the workers call; its ledger is
	// the truth each record is returned with.
	Provider *Provider
	// Tool is an external tool of unknown outcome (default ToolChargeCard;
	// ToolDeployService is the other).
	Tool string
	// Records is how many records the outage leaves stuck.
	Records int
	// Tenants defaults to DefaultTenants.
	Tenants []string
	// Seed makes the records (tenants, intents, which ones the provider
	// acted on) repeatable.
	Seed uint64
	// Lease of the records (default DefaultLease): they are stuck once it
	// has run out.
	Lease time.Duration
	// Workers make the calls (default 8).
	Workers int
}

// Outage leaves cfg.Records records of cfg.Tool pending, the way workers
// dying around a provider's calls leave them: about half died after the
// provider acted (crash-after-provider: it has the effect and a reference),
// the others before calling it (crash-before-provider: it has nothing).
// Nobody retries them, so each is stuck once its lease runs out, and only
// the provider's lookup tells which is which. It returns them with the
// truth, read from the provider's ledger once every call ended: a call
// that failed on a loaded machine (the provider's own store timing out,
// say) left nothing there whatever its scenario.
// Keys are outage-NNNNN:charge (or :deploy), unique within the store as
// long as one outage is simulated per seed and tool.
func Outage(ctx context.Context, cfg OutageConfig) ([]Abandoned, error) {
	if cfg.Pool == nil || cfg.Provider == nil {
		return nil, errors.New("outage: a pool and the provider are required")
	}
	if cfg.Tool == "" {
		cfg.Tool = ToolChargeCard
	}
	if cfg.Tool != ToolChargeCard && cfg.Tool != ToolDeployService {
		return nil, fmt.Errorf("outage: %s is not an external tool of unknown outcome (%s, %s)", cfg.Tool, ToolChargeCard, ToolDeployService)
	}
	if cfg.Records < 0 || cfg.Records > 100_000 {
		return nil, fmt.Errorf("outage: %d records: give 0 to 100000", cfg.Records)
	}
	if len(cfg.Tenants) == 0 {
		cfg.Tenants = DefaultTenants
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	f := &Fleet{
		cfg:      FleetConfig{Pool: cfg.Pool, ProviderURL: cfg.Provider.URL(), Lease: cfg.Lease, CallTimeout: DefaultCallTimeout},
		policies: Policies(cfg.Lease),
		client:   newProviderClient(cfg.Provider.URL()),
		stats:    map[string]int64{},
	}
	defer f.client.close()

	// The records, drawn before any call so that the seed alone decides
	// them.
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6f7574616765)) // "outage"
	p := &planner{rng: rng, tenants: cfg.Tenants}
	type record struct {
		req   ops.Request
		crash crashPoint
	}
	records := make([]record, cfg.Records)
	suffix := "charge"
	if cfg.Tool == ToolDeployService {
		suffix = "deploy"
	}
	for i := range records {
		tenant := cfg.Tenants[rng.IntN(len(cfg.Tenants))]
		records[i].req = ops.Request{
			Identity: ops.Identity{Tenant: tenant, Tool: cfg.Tool, Key: fmt.Sprintf("outage-%05d:%s", i+1, suffix)},
			Version:  toolVersion,
			Intent:   p.intent(cfg.Tool, tenant, i+1, variantOK),
		}
		records[i].crash = crashBeforeCall
		if rng.IntN(2) == 0 {
			records[i].crash = crashAfterCall
		}
	}

	workers := make([]*worker, cfg.Workers)
	for i := range workers {
		workers[i] = &worker{f: f, id: 100 + i} // owners worker-100…, apart from a fleet's
		if err := workers[i].restart(); err != nil {
			return nil, err
		}
	}
	out := make([]Abandoned, len(records))
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	next := make(chan int)
	for _, w := range workers {
		wg.Go(func() {
			for i := range next {
				r := records[i]
				_, err := w.external(ctx, r.req, plan{crash: r.crash})
				if !errors.Is(err, ops.ErrOutcomeUnknown) {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("outage: %s: want an unknown outcome, got %v", r.req.Identity, err)
					}
					mu.Unlock()
				}
				out[i] = Abandoned{Identity: r.req.Identity, Scenario: scenarioOf(r.crash).String()}
			}
		})
	}
feed:
	for i := range records {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for i := range out {
		_, out[i].ProviderActed = cfg.Provider.Effect(ProviderIdentity(out[i].Identity))
	}
	if first == nil {
		first = ctx.Err()
	}
	return out, first
}

func scenarioOf(c crashPoint) scenario {
	if c == crashAfterCall {
		return scCrashAfter
	}
	return scCrashBefore
}
