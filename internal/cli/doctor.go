package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ui"
)

func newDoctorCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the operation store: reachability, schema, role, clock and row counts",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd, g)
			if err != nil {
				return err
			}
			if output == "json" {
				return runDoctorJSON(cmd.Context(), cfg, cmd.OutOrStdout())
			}
			return runDoctor(cmd.Context(), cfg, &doctorOut{w: cmd.OutOrStdout()})
		},
	}
	addGlobalFlags(cmd.Flags(), g)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	return cmd
}

// doctorOut is where doctor's findings go: printed a line each as they
// come (w), or collected into a report for -o json.
type doctorOut struct {
	w      io.Writer // nil: collect into report
	report doctorReport
}

// doctorReport is doctor -o json. OK is false when a check failed (the
// command then exits 1, as without -o json).
type doctorReport struct {
	Context string          `json:"context"`
	Source  string          `json:"source"`
	OK      bool            `json:"ok"`
	Checks  []doctorFinding `json:"checks"`
}

// doctorFinding is one line of doctor's: a check that passed (ok) or
// failed, a warning, or a note (info); More are the lines under it (the
// records a check names).
type doctorFinding struct {
	Check  string   `json:"check"`
	Status string   `json:"status"`
	Detail string   `json:"detail"`
	More   []string `json:"more"`
}

// Statuses of a finding, and the marks the table shows them with.
var doctorMarks = map[string]string{"ok": "✓", "failed": "✗", "warning": "⚠", "info": "-"}

// add records a finding; details quote role and tenant names and the
// server's errors.
func (d *doctorOut) add(status, what, detail string) {
	if status == "failed" {
		d.report.OK = false
	}
	if d.w != nil {
		fmt.Fprintf(d.w, "%s %-12s %s\n", doctorMarks[status], what, termtext.Clean(detail))
		return
	}
	d.report.Checks = append(d.report.Checks, doctorFinding{Check: what, Status: status, Detail: termtext.Clean(detail)})
}

// check records a check that passed or failed.
func (d *doctorOut) check(ok bool, what, detail string) {
	status := "ok"
	if !ok {
		status = "failed"
	}
	d.add(status, what, detail)
}

// more adds a line under the last finding.
func (d *doctorOut) more(line string) {
	if d.w != nil {
		fmt.Fprintln(d.w, "  "+line)
		return
	}
	if n := len(d.report.Checks); n > 0 {
		d.report.Checks[n-1].More = append(d.report.Checks[n-1].More, line)
	}
}

// runDoctorJSON is runDoctor for -o json: the report, then the same exit.
func runDoctorJSON(ctx context.Context, cfg *config.Config, w io.Writer) error {
	out := &doctorOut{}
	err := runDoctor(ctx, cfg, out)
	if err != nil && !errors.Is(err, errDoctor) {
		return err
	}
	if jerr := writeJSON(w, out.report); jerr != nil {
		return jerr
	}
	return err
}

// errDoctor marks a failed check; the checks already said what is wrong.
var errDoctor = errors.New("some checks failed")

func runDoctor(ctx context.Context, cfg *config.Config, out *doctorOut) error {
	check := out.check
	source := "flags and environment"
	if cfg.File != "" {
		source = cfg.File
	}
	out.report = doctorReport{Context: termtext.Clean(cfg.Context.Name), Source: termtext.Clean(source), OK: true, Checks: []doctorFinding{}}
	if out.w != nil {
		fmt.Fprintf(out.w, "context %s (from %s)\n", out.report.Context, out.report.Source)
	}

	poolCfg, err := viewPoolConfig(cfg.Context)
	if err != nil {
		return err
	}
	start := time.Now()
	pool, err := db.Open(ctx, poolCfg)
	if err != nil {
		check(false, "reachable", err.Error())
		return errDoctor
	}
	defer pool.Close()
	check(true, "reachable", fmt.Sprintf("%s:%d/%s in %v", poolCfg.ConnConfig.Host, poolCfg.ConnConfig.Port,
		poolCfg.ConnConfig.Database, time.Since(start).Round(time.Millisecond)))

	version, err := db.CheckSchema(ctx, pool)
	switch {
	case err != nil:
		check(false, "schema", err.Error())
	default:
		check(true, "schema", fmt.Sprintf("version %d (this opsdesk needs %d)", version, db.LatestVersion()))
		doctorLeakproof(ctx, pool, out)
	}

	doctorRole(ctx, pool, out)
	doctorClock(ctx, pool, check)
	doctorPrivileged(ctx, newView(pool, cfg.Context), out)
	if err == nil {
		view := newView(pool, cfg.Context)
		doctorCounts(ctx, view, check)
		doctorTrail(ctx, view, pool, out)
		doctorTimes(ctx, view, out)
		doctorPurges(ctx, view, out)
		doctorPolicies(ctx, view, cfg, out)
		doctorReconciler(ctx, pool, cfg, out)
	}
	if !out.report.OK {
		return errDoctor
	}
	return nil
}

func doctorRole(ctx context.Context, pool *pgxpool.Pool, out *doctorOut) {
	check := out.check
	var role string
	var super, service, viewer, operator, admin, machine, read bool
	member := func(group string) string {
		return "(to_regrole('" + group + "') IS NOT NULL AND pg_has_role(session_user, '" + group + "', 'MEMBER'))"
	}
	err := pool.QueryRow(ctx, `
SELECT session_user, r.rolsuper, `+member("opsdesk_service")+`, `+member("opsdesk_viewer")+`,
    `+member("opsdesk_operator")+`, `+member("opsdesk_admin")+`, `+member("opsdesk_reconciler")+`,
    CASE WHEN to_regnamespace('opsdesk') IS NOT NULL AND has_schema_privilege(session_user, 'opsdesk', 'USAGE')
         THEN to_regclass('opsdesk.operations') IS NOT NULL
              AND has_table_privilege(session_user, 'opsdesk.operations', 'SELECT')
         ELSE false END
FROM pg_roles r WHERE r.rolname = session_user`).Scan(&role, &super, &service, &viewer, &operator, &admin, &machine, &read)
	if err != nil {
		check(false, "role", "cannot read the connected role: "+err.Error())
		return
	}
	var may []string
	switch {
	case super:
		may = append(may, "superuser: everything, every tenant")
	case admin:
		may = append(may, "admin: decide, acknowledge, reveal, grant access")
	case operator:
		may = append(may, "operator: decide, acknowledge, reveal")
	case machine:
		may = append(may, "reconciler: read, and decide what the reconciler's allowlist lets a lookup settle")
	case viewer:
		may = append(may, "viewer: read states and the audit trail")
	case read:
		may = append(may, "read operations")
	}
	if service {
		may = append(may, "run the library (opsdesk_service, every tenant)")
	}
	if len(may) == 0 {
		check(false, "role", role+" may not read the operation store; an opsdesk admin runs: "+grantHint(role, "viewer"))
		return
	}
	if viewer && !super {
		level := "viewer"
		switch {
		case admin:
			level = "admin"
		case operator:
			level = "operator"
		case machine:
			level = "reconciler"
		}
		may = append(may, doctorTenants(ctx, pool, role, level))
	}
	if super {
		// Everything works as a superuser, and that is the warning: its
		// decisions are audited under it, it bypasses row-level security
		// and the state machine's people's rules.
		out.add("warning", "role", role+": "+strings.Join(may, "; ")+
			"; people's decisions made as a superuser bypass what the database enforces for people: connect as an operator or admin "+
			"(opsdesk access grant NAME --as operator)")
		return
	}
	check(true, "role", role+": "+strings.Join(may, "; "))
}

// doctorLeakproof warns when the batch lookups of migration 00029 are
// not leakproof (a schema installed without a superuser): under
// row-level security audit batches then read every batched record for
// each run on a page.
func doctorLeakproof(ctx context.Context, pool *pgxpool.Pool, out *doctorOut) {
	var leakproof bool
	err := pool.QueryRow(ctx, `SELECT bool_and(proleakproof) FROM pg_catalog.pg_proc
WHERE oid IN ('opsdesk.batch_of(jsonb)'::regprocedure, 'opsdesk.uuid_text(uuid)'::regprocedure)`).Scan(&leakproof)
	if err != nil || leakproof {
		return // the schema check said what is wrong with the schema
	}
	out.add("warning", "schema", "opsdesk.batch_of and opsdesk.uuid_text are not LEAKPROOF (the schema was installed without a "+
		"superuser): audit batches read every batched record for each run; a superuser runs "+
		"ALTER FUNCTION opsdesk.batch_of(jsonb) LEAKPROOF; ALTER FUNCTION opsdesk.uuid_text(uuid) LEAKPROOF;")
}

// grantHint is the command an admin runs to give role a tenant.
func grantHint(role, level string) string {
	return "opsdesk access grant " + role + " --as " + level + " --tenant T --reason …"
}

// doctorTenants says which tenants a person's role sees.
func doctorTenants(ctx context.Context, pool *pgxpool.Pool, role, level string) string {
	var every bool
	var tenants []string
	err := pool.QueryRow(ctx, `SELECT opsdesk.sees_every_tenant(), opsdesk.visible_tenants()`).Scan(&every, &tenants)
	switch {
	case err != nil:
		return "tenants unknown (" + err.Error() + ")"
	case every:
		return "every tenant"
	case len(tenants) == 0:
		return "no tenant yet: an admin runs " + grantHint(role, level)
	}
	slices.Sort(tenants)
	return "tenants " + strings.Join(tenants, ", ")
}

func doctorClock(ctx context.Context, pool *pgxpool.Pool, check func(bool, string, string)) {
	var dbNow time.Time
	before := time.Now()
	if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&dbNow); err != nil {
		check(false, "clock", err.Error())
		return
	}
	rtt := time.Since(before)
	skew := time.Until(dbNow) + rtt/2 // the server read its clock about halfway through
	detail := fmt.Sprintf("client is %v %s the database (round trip %v); opsdesk uses the database clock",
		abs(skew).Round(time.Millisecond), map[bool]string{true: "behind", false: "ahead of"}[skew > 0], rtt.Round(time.Millisecond))
	check(abs(skew) < 5*time.Second, "clock", detail)
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// doctorTrail says whether audit entries wait to be sealed into their
// chains, after the overview's seal: a warning, not a failure (the changes
// they record are made and their entries kept), naming the command that
// says who holds their chains.
func doctorTrail(ctx context.Context, view *storeview.Store, pool *pgxpool.Pool, out *doctorOut) {
	check := out.check
	t, err := view.Trail(ctx)
	switch {
	case err != nil:
		check(false, "audit", err.Error())
	case t.Queued.Entries > 0:
		out.add("warning", "audit", fmt.Sprintf("%s not sealed into their chains yet, the oldest queued %s ago: opsdesk audit seal names the session holding their chains",
			entries(t.Queued.Entries), t.Queued.Oldest.Round(time.Second)))
	default:
		check(true, "audit", "every entry sealed, "+counted(len(t.Heads), "chain"))
	}
	// A reveal fetched in a transaction that rolled back left no record of
	// its fetch (and could be fetched again); the count of every fetch says
	// so, to roles that see every tenant.
	var attempted, recorded *int64
	if err := pool.QueryRow(ctx, `SELECT attempted, recorded FROM opsdesk.reveal_fetch_counts()`).Scan(&attempted, &recorded); err == nil &&
		attempted != nil && recorded != nil && *attempted > *recorded {
		out.add("warning", "reveals", fmt.Sprintf("%d of %d reveal fetches ran in transactions that rolled back: their values were read, their fetches are not recorded (opsdesk audit list action:reveal:* has the requests)",
			*attempted-*recorded, *attempted))
	}
}

// doctorPurges names the purge runs started and never finished: records
// went, and the audit trail has their start record but no result yet. A
// warning, not a failure: a purge under way is unfinished too (its last
// batch says how recent it is). Only admins of every tenant see purge runs.
func doctorPurges(ctx context.Context, view *storeview.Store, out *doctorOut) {
	check := out.check
	runs, seen, err := view.UnfinishedPurges(ctx)
	switch {
	case err != nil:
		check(false, "purges", err.Error())
	case !seen:
		out.add("info", "purges", "purge runs are visible to admins of every tenant only")
	case len(runs) == 0:
		check(true, "purges", "no unfinished purge run")
	}
	for _, u := range runs {
		out.add("warning", "purges", u.Warning())
	}
}

func doctorCounts(ctx context.Context, view *storeview.Store, check func(bool, string, string)) {
	o, err := view.Overview(ctx)
	if err != nil {
		check(false, "rows", err.Error())
		return
	}
	n := func(v int64, estimated bool) string { return ui.OverviewFigure(&o, v, estimated) }
	note := ""
	switch {
	case o.Estimated() && o.Scoped:
		note = " (" + n(0, true) + ": more; statistics span every tenant, not just yours)"
	case o.Estimated():
		note = " (~: estimated)"
	}
	check(true, "rows", fmt.Sprintf("%s pending, %s stuck, %s completed, %s rejected, %s released, %s conflicted%s",
		n(o.Pending, o.PendingEstimated), n(o.Stuck, o.StuckEstimated), n(o.Completed, o.CompletedEstimated), n(o.Rejected, o.RejectedEstimated),
		n(o.Released, o.ReleasedEstimated), n(o.Conflicted, o.ConflictedEstimated), note))
}

// doctorTimesListed is how many records with times out of bounds doctor
// names.
const doctorTimesListed = 20

// doctorTimes names the records holding a time no service may write, each
// with the command that shows it: the console reads them, but a lease
// that never ends is never stuck and never alerts, and an expiry that
// never comes is never purged. A failure: a person must look.
func doctorTimes(ctx context.Context, view *storeview.Store, out *doctorOut) {
	check := out.check
	records, more, err := view.OutOfBounds(ctx, doctorTimesListed)
	switch {
	case err != nil:
		check(false, "times", err.Error())
		return
	case len(records) == 0:
		check(true, "times", "no record holds an infinite or out-of-bounds time")
		return
	}
	n := counted(len(records), "record") + " holds"
	switch {
	case more:
		n = "more than " + counted(len(records), "record") + " hold"
	case len(records) > 1:
		n = counted(len(records), "record") + " hold"
	}
	check(false, "times", n+" times no service may write (infinite, before 1970, or past the longest "+
		"lease or retention): a lease that never ends is never stuck and never alerts. A pending one is decided with "+
		"opsdesk resolve ID --force; other times only a superuser corrects")
	for _, r := range records {
		out.more(fmt.Sprintf("#%d %s/%s/%s: %s · opsdesk ops show %d", r.ID, termtext.Clean(r.Tenant), termtext.Clean(r.Tool), termtext.Clean(r.Key),
			termtext.Clean(strings.Join(r.Times, ", ")), r.ID))
	}
	if more {
		out.more("… and more: opsdesk ops list shows every record")
	}
}
