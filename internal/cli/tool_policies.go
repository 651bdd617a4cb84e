package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/storeview"
)

// withRecordedPolicies is cfg with each tool's policy as its service
// recorded it in the store (ops.New): the service's effect, lease,
// retention, retry window and after-expiry behaviour replace the
// catalog's, which keeps the people's parts (runbook, lookup). A tool the
// catalog alone knows keeps the catalog's values. When the recorded
// policies cannot be read, cfg is returned as it is: doctor says why.
func withRecordedPolicies(ctx context.Context, view *storeview.Store, cfg *config.Config) *config.Config {
	recorded, err := view.ToolPolicies(ctx)
	if err != nil || len(recorded) == 0 {
		return cfg
	}
	out := *cfg
	out.Tools = maps.Clone(cfg.Tools)
	if out.Tools == nil {
		out.Tools = map[string]config.Tool{}
	}
	for name, p := range recorded {
		t := out.Tools[name]
		t.Effect, t.Lease, t.Retention, t.RetryWindow, t.AfterExpiry = p.Effect, p.Lease, p.Retention, p.RetryWindow, p.AfterExpiry
		out.Tools[name] = t
	}
	return &out
}

// policyDisagreements names each value the catalog gives tool that
// differs from the policy its service recorded; the catalog's zero values
// (unset) agree with anything.
func policyDisagreements(t config.Tool, p storeview.RecordedPolicy) []string {
	var out []string
	differ := func(key, catalog, recorded string) {
		out = append(out, fmt.Sprintf("%s %s in the catalog, %s recorded", key, catalog, recorded))
	}
	if t.Effect != "" && t.Effect != p.Effect {
		differ("effect", t.Effect, p.Effect)
	}
	for _, d := range []struct {
		key               string
		catalog, recorded time.Duration
	}{{"lease", t.Lease, p.Lease}, {"retention", t.Retention, p.Retention}, {"retry_window", t.RetryWindow, p.RetryWindow}} {
		if d.catalog != 0 && d.catalog != d.recorded {
			differ(d.key, config.FormatDuration(d.catalog), config.FormatDuration(d.recorded))
		}
	}
	if t.AfterExpiry != "" && t.AfterExpiry != p.AfterExpiry {
		differ("after_expiry", t.AfterExpiry, p.AfterExpiry)
	}
	return out
}

// policyChange names the values a tool's recorded policy changed from.
func policyChange(p storeview.RecordedPolicy) string {
	was := p.Previous
	var parts []string
	add := func(key, from, to string) {
		if from != to {
			parts = append(parts, fmt.Sprintf("%s %s → %s", key, from, to))
		}
	}
	add("effect", was.Effect, p.Effect)
	add("lease", config.FormatDuration(was.Lease), config.FormatDuration(p.Lease))
	add("retention", config.FormatDuration(was.Retention), config.FormatDuration(p.Retention))
	add("retry_window", config.FormatDuration(was.RetryWindow), config.FormatDuration(p.RetryWindow))
	add("after_expiry", was.AfterExpiry, p.AfterExpiry)
	return strings.Join(parts, ", ")
}

// doctorPolicies compares the catalog with the policies the services
// recorded: a catalog value that disagrees is a failure (the console runs
// by the recorded one, so the catalog misleads whoever reads it); a policy
// replaced by a different one, and a tool the catalog alone knows, are
// warnings.
func doctorPolicies(ctx context.Context, view *storeview.Store, cfg *config.Config, out *doctorOut) {
	check := out.check
	recorded, err := view.ToolPolicies(ctx)
	if err != nil {
		check(false, "policies", err.Error())
		return
	}
	names := slices.Sorted(maps.Keys(cfg.Tools))
	for name := range recorded {
		if _, ok := cfg.Tools[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	agree := true
	for _, name := range names {
		p, isRecorded := recorded[name]
		t, inCatalog := cfg.Tools[name]
		switch {
		case !isRecorded:
			out.add("info", "policies", "tool "+name+" is in the catalog only: no service recorded its policy, the catalog's values are used")
			continue
		case inCatalog:
			if d := policyDisagreements(t, p); len(d) > 0 {
				agree = false
				check(false, "policies", fmt.Sprintf("tool %s: %s (by %s at %s): the console uses the recorded policy; "+
					"remove these keys from the catalog or correct them", name, strings.Join(d, ", "), p.RecordedBy,
					p.RecordedAt.UTC().Format(time.RFC3339)))
			}
		}
		if p.Previous != nil {
			out.add("warning", "policies", fmt.Sprintf(
				"tool %s: %s recorded %s at %s, replacing the policy %s recorded at %s: two services disagree, or a deploy changed it",
				name, p.RecordedBy, policyChange(p), p.ChangedAt.UTC().Format(time.RFC3339), p.Previous.RecordedBy,
				p.Previous.RecordedAt.UTC().Format(time.RFC3339)))
		}
	}
	if agree {
		check(true, "policies", fmt.Sprintf("policies recorded by the services: %d; the catalog agrees", len(recorded)))
	}
}
