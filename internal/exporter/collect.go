package exporter

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

// descs describe the metrics (docs/metrics: the names are a contract with
// the alert rules).
type descs struct {
	tenantLabels bool

	operations, exact, oldestStuck, conflicts, deferredDue, expired   *prometheus.Desc
	purges, chainHead, unsealed, oldestUnsealed, verifyOK, verifyTime *prometheus.Desc
	privileged, reconcilerPaused                                      *prometheus.Desc
	up, duration, partial, errors                                     *prometheus.Desc
}

func newDescs(tenantLabels bool) descs {
	tool := []string{"tool"}
	if tenantLabels {
		tool = []string{"tenant", "tool"}
	}
	state := append(slices.Clone(tool), "state")
	tenant := []string{"tenant"}
	return descs{
		tenantLabels: tenantLabels,
		operations: prometheus.NewDesc("opsdesk_operations",
			"Records by tool and state, as the console counts them: pending (lease live), stuck (lease expired past stuck_after, "+
				"not deferred), deferred (stuck, a person deferred it and the snooze time has not come), completed (succeeded), "+
				"rejected, released. Exact up to 1000, then estimated: see opsdesk_operations_exact.", state, nil),
		exact: prometheus.NewDesc("opsdesk_operations_exact",
			"1 when the count of the same tool and state is exact, 0 when it is the planner's estimate or, for a role that "+
				"sees some tenants only, a lower bound. State also takes conflicts_unreviewed, deferred_due and "+
				"retention_expired, for the metrics of those names.", state, nil),
		oldestStuck: prometheus.NewDesc("opsdesk_oldest_stuck_seconds",
			"Seconds since the lease of the tool's oldest stuck record expired (deferred records left out, as the console "+
				"does); 0 when none is stuck.", tool, nil),
		conflicts: prometheus.NewDesc("opsdesk_conflicts_unreviewed",
			"Records with conflicting attempts (a key reused with another intent) nobody reviewed.", tool, nil),
		deferredDue: prometheus.NewDesc("opsdesk_deferred_due",
			"Stuck records whose deferral's snooze time has passed: someone promised to look again.", tool, nil),
		expired: prometheus.NewDesc("opsdesk_retention_expired",
			"Completed records whose retention has ended (held ones included): a purge is due.", tool, nil),
		purges: prometheus.NewDesc("opsdesk_purge_unfinished_runs",
			"Purge runs started and never finished (reported to roles that see every tenant).", nil, nil),
		chainHead: prometheus.NewDesc("opsdesk_audit_chain_head_seq",
			"The last seq of each tenant's audit chain (tenant \"\" is the chain of events outside any tenant).", tenant, nil),
		unsealed: prometheus.NewDesc("opsdesk_audit_unsealed_entries",
			"Audit entries committed with their changes and not yet sealed into their chain (no seq yet), in the chains the "+
				"role sees. Each scrape seals what it can first: a count that stays up means a session holds a chain's head.", nil, nil),
		oldestUnsealed: prometheus.NewDesc("opsdesk_audit_oldest_unsealed_seconds",
			"Seconds the oldest entry of opsdesk_audit_unsealed_entries has waited (database clock); 0 when none waits.", nil, nil),
		verifyOK: prometheus.NewDesc("opsdesk_audit_verify_ok",
			"1 when the chain verified in the last full verification (--verify-every), 0 when it did not.", tenant, nil),
		verifyTime: prometheus.NewDesc("opsdesk_audit_verify_timestamp_seconds",
			"When the last full verification of the chain read it (database clock, Unix seconds).", tenant, nil),
		privileged: prometheus.NewDesc("opsdesk_privileged_logins",
			"Login roles that can bypass what the database enforces (forge audit records, give any role every tenant, "+
				"rewrite completed records), by class: superuser (or able to become one), table_owner (owns opsdesk's "+
				"schema or tables), opsdesk_owner (a member, directly or through other roles), createrole (PostgreSQL "+
				"before 16), write_all_data (pg_write_all_data). A superuser counts as a superuser only. opsdesk doctor "+
				"names them.", []string{"class"}, nil),
		reconcilerPaused: prometheus.NewDesc("opsdesk_reconciler_store_paused",
			"1 when an admin paused every reconciler (opsdesk reconciler pause): the database refuses their decisions, "+
				"and stuck records of auto-reconciled tools wait for people.", nil, nil),
		up: prometheus.NewDesc("opsdesk_store_up",
			"1 when the store answered this scrape, 0 when it did not.", nil, nil),
		duration: prometheus.NewDesc("opsdesk_scrape_duration_seconds",
			"How long this scrape's reads took.", nil, nil),
		partial: prometheus.NewDesc("opsdesk_scrape_partial",
			"1 when a read failed or the time budget ran out before every read finished: some metrics are missing from "+
				"this scrape.", nil, nil),
		errors: prometheus.NewDesc("opsdesk_scrape_errors_total",
			"Reads of the store that failed or ran out of time, since the exporter started.", nil, nil),
	}
}

func (d descs) describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{d.operations, d.exact, d.oldestStuck, d.conflicts, d.deferredDue, d.expired,
		d.purges, d.chainHead, d.unsealed, d.oldestUnsealed, d.verifyOK, d.verifyTime, d.privileged, d.reconcilerPaused, d.up, d.duration, d.partial, d.errors} {
		ch <- desc
	}
}

// part is one read of a scrape and what it sends.
type part struct {
	name string
	err  error
	emit func(ch chan<- prometheus.Metric)
}

// collect reads the store until ctx's deadline and sends what it read.
// The reads run side by side, so that a lock on one table keeps only its
// own metrics out. They stop a little before the deadline, and collect
// answers at the deadline with the reads that finished.
func (e *Exporter) collect(ctx context.Context, ch chan<- prometheus.Metric) {
	start := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = start.Add(e.cfg.Budget)
	}
	grace := min(100*time.Millisecond, time.Until(deadline)/10)
	readCtx, cancel := context.WithDeadline(ctx, deadline.Add(-grace))
	defer cancel()

	// Sealed first, so that the reads count what people decided, however
	// the decision's own command ended: a deferral counts once sealed. A
	// seal that fails leaves entries queued, which the heads' read counts.
	if _, err := e.view.Seal(readCtx); err != nil {
		e.errors.Add(1)
		e.cfg.Logf("scrape: %v", err)
	}
	reads := []func(context.Context) part{e.readPing, e.readSignals, e.readHeads, e.readPurges, e.readPrivileged, e.readReconciler}
	done := make(chan part, len(reads))
	for _, read := range reads {
		go func() { done <- read(readCtx) }()
	}
	var parts []part
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
wait:
	for len(parts) < len(reads) {
		select {
		case p := <-done:
			parts = append(parts, p)
		case <-timeout.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	elapsed := time.Since(start)

	partial := len(parts) < len(reads)
	up := false
	for _, p := range parts {
		if p.err != nil {
			e.errors.Add(1)
			// A read that failed left its metrics out, whether the budget
			// cut it short or the store refused or lost it: either way the
			// alerts on them cannot fire, and the scrape must say so. (The
			// ping's failure leaves nothing out: store_up says it.)
			if readCtx.Err() != nil || p.name != "ping" {
				partial = true
			}
			e.cfg.Logf("scrape: %v", p.err)
		}
		if p.name == "ping" && p.err == nil {
			up = true
		}
		if p.emit != nil {
			p.emit(ch)
		}
	}
	if missing := len(reads) - len(parts); missing > 0 {
		e.errors.Add(int64(missing))
		e.cfg.Logf("scrape: %v: %d of %d reads unfinished", errBudget, missing, len(reads))
	}
	if up {
		e.reached.Store(time.Now().UnixNano())
	}
	e.emitVerifications(ch)
	e.send(ch, e.descs.up, prometheus.GaugeValue, bit(up))
	e.send(ch, e.descs.partial, prometheus.GaugeValue, bit(partial))
	e.send(ch, e.descs.duration, prometheus.GaugeValue, elapsed.Seconds())
	e.send(ch, e.descs.errors, prometheus.CounterValue, float64(e.errors.Load()))
}

func (e *Exporter) readPing(ctx context.Context) part {
	return part{name: "ping", err: e.view.Ping(ctx)}
}

func (e *Exporter) readSignals(ctx context.Context) part {
	sig, err := e.view.Signals(ctx, storeview.SignalsOpts{ByTenant: e.cfg.TenantLabels})
	return part{name: "signals", err: err, emit: func(ch chan<- prometheus.Metric) { e.emitSignals(ch, sig) }}
}

func (e *Exporter) readHeads(ctx context.Context) part {
	trail, err := e.view.Trail(ctx)
	return part{name: "heads", err: err, emit: func(ch chan<- prometheus.Metric) {
		if err != nil {
			return
		}
		for _, h := range trail.Heads {
			e.send(ch, e.descs.chainHead, prometheus.GaugeValue, float64(h.Seq), labelValue(h.Tenant))
		}
		e.send(ch, e.descs.unsealed, prometheus.GaugeValue, float64(trail.Queued.Entries))
		e.send(ch, e.descs.oldestUnsealed, prometheus.GaugeValue, trail.Queued.Oldest.Seconds())
	}}
}

func (e *Exporter) readPurges(ctx context.Context) part {
	n, seen, err := e.view.UnfinishedPurgeCount(ctx)
	return part{name: "purges", err: err, emit: func(ch chan<- prometheus.Metric) {
		if seen {
			e.send(ch, e.descs.purges, prometheus.GaugeValue, float64(n))
		}
	}}
}

func (e *Exporter) readReconciler(ctx context.Context) part {
	paused, err := e.view.ReconcilerPaused(ctx)
	return part{name: "reconciler", err: err, emit: func(ch chan<- prometheus.Metric) {
		if err == nil {
			e.send(ch, e.descs.reconcilerPaused, prometheus.GaugeValue, bit(paused))
		}
	}}
}

// readPrivileged counts the logins of each class, every class sent
// (zero when none), so that a class's first login is an increase.
func (e *Exporter) readPrivileged(ctx context.Context) part {
	logins, err := e.view.PrivilegedLogins(ctx)
	return part{name: "privileged", err: err, emit: func(ch chan<- prometheus.Metric) {
		if err != nil {
			return
		}
		n := map[storeview.PrivilegeClass]int{}
		for _, l := range logins {
			n[l.Class]++
		}
		for _, class := range storeview.PrivilegeClasses {
			e.send(ch, e.descs.privileged, prometheus.GaugeValue, float64(n[class]), string(class))
		}
	}}
}

// emitSignals sends the per-tool metrics of the parts Signals read.
func (e *Exporter) emitSignals(ch chan<- prometheus.Metric, sig storeview.Signals) {
	for _, t := range sig.Tools {
		labels := []string{labelValue(t.Tool)}
		if e.descs.tenantLabels {
			labels = []string{labelValue(t.Tenant), labelValue(t.Tool)}
		}
		count := func(desc *prometheus.Desc, state string, c readmodel.Count) {
			if desc != nil {
				e.send(ch, desc, prometheus.GaugeValue, float64(c.N), labels...)
			}
			exact := !c.Estimated && !c.AtLeast
			e.send(ch, e.descs.exact, prometheus.GaugeValue, bit(exact), append(slices.Clone(labels), state)...)
		}
		state := func(state string, c readmodel.Count) {
			e.send(ch, e.descs.operations, prometheus.GaugeValue, float64(c.N), append(slices.Clone(labels), state)...)
			count(nil, state, c)
		}
		if sig.Read&storeview.SignalCounts != 0 {
			state("stuck", t.Stuck)
			state("deferred", t.Deferred)
			count(e.descs.deferredDue, "deferred_due", t.DeferredDue)
			age := 0.0
			if !t.OldestStuck.IsZero() {
				age = max(0, sig.DBTime.Sub(t.OldestStuck).Seconds())
			}
			e.send(ch, e.descs.oldestStuck, prometheus.GaugeValue, age, labels...)
			state("pending", t.Pending)
			state("rejected", t.Rejected)
			state("released", t.Released)
			count(e.descs.conflicts, "conflicts_unreviewed", t.Conflicted)
			count(e.descs.expired, "retention_expired", t.Expired)
		}
		if sig.Read&storeview.SignalEstimates != 0 {
			state("completed", t.Completed)
		}
	}
}

// emitVerifications sends the last verification's result of each chain.
func (e *Exporter) emitVerifications(ch chan<- prometheus.Metric) {
	for tenant, v := range e.verifications() {
		e.send(ch, e.descs.verifyOK, prometheus.GaugeValue, bit(v.ok), labelValue(tenant))
		e.send(ch, e.descs.verifyTime, prometheus.GaugeValue, float64(v.at.UnixNano())/1e9, labelValue(tenant))
	}
}

// send sends one metric; one that cannot be made is left out and logged.
func (e *Exporter) send(ch chan<- prometheus.Metric, desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(desc, t, v, labels...)
	if err != nil {
		e.cfg.Logf("scrape: %v", fmt.Errorf("make metric %s: %w", desc, err))
		return
	}
	ch <- m
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
