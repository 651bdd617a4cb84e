package demo

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/ops"
)

// CatalogParams is what the demo's configuration file points at.
type CatalogParams struct {
	// DSN reaches the demo's operation store.
	DSN string
	// ProviderURL is the simulated provider's base URL, for the lookups.
	ProviderURL string
	// Lease of every tool (default DefaultLease), as the fleet runs them.
	Lease time.Duration
}

// AutoReconciled is the tool whose definite lookups the demo's reconciler
// decides (opsdesk reconciler): its catalog entry names auto_reconcile,
// and the demo lets it in the store's allowlist.
const AutoReconciled = ToolChargeCard

// lookupTimeout bounds a console's outcome lookup at the provider.
const lookupTimeout = 2 * time.Second

// Catalog renders an opsdesk configuration file for the demo: a context
// named demo on its store, and the tool catalog of the five tools with
// their effect, lease, retention, runbook and, for the external ones, an
// outcome lookup at the simulated provider. Open the console on it with
// OPSDESK_CONFIG=<file>.
func Catalog(p CatalogParams) []byte {
	lease := p.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	var b strings.Builder
	b.WriteString("# opsdesk demo: a context on the demo's operation store and the catalog of the\n")
	b.WriteString("# simulated fleet's tools. Written by `opsdesk demo`; removed with the demo's cluster.\n")
	b.WriteString("current_context: demo\n")
	b.WriteString("contexts:\n")
	b.WriteString("  demo:\n")
	fmt.Fprintf(&b, "    dsn: %s\n", quote(p.DSN))
	b.WriteString("    refresh: 1s\n")
	b.WriteString("tools:\n")
	for _, t := range tools {
		fmt.Fprintf(&b, "  %s:\n", t.name)
		fmt.Fprintf(&b, "    effect: %s\n", t.effect)
		fmt.Fprintf(&b, "    lease: %s\n", config.FormatDuration(lease))
		retention := t.retention
		if retention <= 0 {
			retention = ops.DefaultRetention
		}
		fmt.Fprintf(&b, "    retention: %s\n", config.FormatDuration(retention))
		if t.retryWindow > 0 {
			fmt.Fprintf(&b, "    retry_window: %s\n", config.FormatDuration(t.retryWindow))
		}
		if t.afterExpiry != "" {
			fmt.Fprintf(&b, "    after_expiry: %s\n", t.afterExpiry)
		}
		b.WriteString("    runbook: |\n")
		for line := range strings.SplitSeq(t.runbook, "\n") {
			fmt.Fprintf(&b, "      %s\n", line)
		}
		if t.effect != ops.EffectLocal {
			b.WriteString("    lookup:\n")
			fmt.Fprintf(&b, "      url: %s\n", quote(p.ProviderURL+LookupPath))
			fmt.Fprintf(&b, "      timeout: %s\n", config.FormatDuration(lookupTimeout))
			b.WriteString("      result_ref: /ref\n") // lookupAnswer.Ref
		}
		if t.name == AutoReconciled {
			b.WriteString("    auto_reconcile: [found, not_found]\n")
		}
	}
	return []byte(b.String())
}

// WriteCatalog writes Catalog(p) to path, readable by its owner only: it
// holds a DSN.
func WriteCatalog(path string, p CatalogParams) error {
	if err := os.WriteFile(path, Catalog(p), 0o600); err != nil {
		return fmt.Errorf("write the demo's tool catalog: %w", err)
	}
	return nil
}

// quote writes s as a YAML double-quoted scalar: Go's escapes (\", \\, \n,
// \xXX, \uXXXX) are all YAML escapes too.
func quote(s string) string { return strconv.Quote(s) }
