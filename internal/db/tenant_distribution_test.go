package db_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// Tenant is the distribution key (docs/design.md, docs/scaling.md): a
// sharded PostgreSQL (Citus) can take the store when one server is not
// enough only while every unique key of a tenant-scoped table includes
// tenant, no key or trigger joins rows of two tenants, and a call writes
// one tenant's rows. The checks below read the migrated catalog, so they
// apply to every table, key, trigger and function a later migration adds;
// TestTenantCheckerCatchesABrokenSchema shows that each of them can fail.
//
// A tenant-scoped table is a table of schema opsdesk with a column named
// tenant. Every other table must be named in notTenantScoped, with what it
// becomes on Citus.

// notTenantScoped names the tables of schema opsdesk without a tenant
// column, each with what it becomes on Citus and why (docs/scaling.md).
var notTenantScoped = map[string]string{
	"purge_runs":        "coordinator-local: one row per retention run, across every tenant; written by the purge's start and finish, read by the review",
	"purge_batches":     "coordinator-local, next to purge_runs (its foreign key): one row per batch of a run, with a per-tenant count in JSON",
	"refusal_windows":   "coordinator-local: per login, counts refusals beyond 30 a minute; a person's role is not a tenant",
	"refusal_summaries": "coordinator-local: per login, what of refusal_windows has been audited on the '' chain",
	"schema_migrations": "coordinator-local: goose's record of the migrations",
	"secrets":           "reference table: the store's own keys (for example the reveal-name key), read by functions on every node",
	"tool_policies":     "reference table: one row per tool, the same for every tenant, read by the console and doctor beside any tenant's rows",
	"auto_reconcile":    "reference table: one row per tool a reconciler may decide, the same for every tenant, read by decide on every node",
	"reconciler_pause":  "reference table: one row, the reconciler's kill switch, read by decide on every node",
	"batches": "reference table: one row per bulk run or reconciler pass, which may decide records of every tenant its " +
		"login sees; written once by start_batch (a run's start, rare), read by decide on every node to check a decision's batch",
}

// referenceTables are tenant-scoped tables that become reference tables
// (a copy on every node), not distributed by tenant: their tenant column
// names what a row grants, not whose data the row is. A call that writes
// one of them and one tenant's rows is not a write across tenants.
var referenceTables = map[string]string{
	"access": "who may see which tenant: read by every tenant-scoped table's row-level security policy (visible_tenants), " +
		"so it must be on every node; its tenant may be '*' (every tenant), which no distributed row has",
}

// unkeyedInTriggers are statements of trigger functions (and what they
// call) that name a tenant-scoped table without a tenant predicate, by
// function and table, each with why it is not a join across tenants.
var unkeyedInTriggers = map[[2]string]string{
	{"records_keep_conflicts", "conflicts"}: "its TRUNCATE branch: a TRUNCATE of operations removes every tenant's records, " +
		"so it refuses if any conflict at all is left (Citus propagates TRUNCATE to every shard)",
	{"record_conflicts_track", "record_conflicts"}: "its TRUNCATE branches: a TRUNCATE of operations (or conflicts) empties " +
		"every tenant's, so every tenant's summary row goes (or is marked reviewed) with it, on every shard",
}

// tenantCheckQuerier is what the checks read the catalog through.
type tenantCheckQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// tenantTables returns the tables of schema opsdesk with a tenant column.
func tenantTables(ctx context.Context, q tenantCheckQuerier) (map[string]bool, error) {
	rows, err := q.Query(ctx, `
SELECT c.relname::text, EXISTS (SELECT FROM pg_attribute a
    WHERE a.attrelid = c.oid AND a.attname = 'tenant' AND a.attnum > 0 AND NOT a.attisdropped)
FROM pg_class c
WHERE c.relnamespace = 'opsdesk'::regnamespace AND c.relkind IN ('r', 'p')`)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	var name string
	var scoped bool
	_, err = pgx.ForEachRow(rows, []any{&name, &scoped}, func() error {
		out[name] = scoped
		return nil
	})
	return out, err
}

// tableProblems names the tables that have no tenant column and are not
// classified in notTenantScoped, and the classified ones that are gone or
// have a tenant column now.
func tableProblems(ctx context.Context, q tenantCheckQuerier) ([]string, error) {
	tables, err := tenantTables(ctx, q)
	if err != nil {
		return nil, err
	}
	var problems []string
	for name, scoped := range tables {
		if _, named := notTenantScoped[name]; !scoped && !named {
			problems = append(problems, fmt.Sprintf("table opsdesk.%s has no tenant column: add one, or name it in "+
				"notTenantScoped with what it becomes on Citus (reference or coordinator-local)", name))
		}
	}
	for name := range notTenantScoped {
		if scoped, ok := tables[name]; !ok || scoped {
			problems = append(problems, fmt.Sprintf("notTenantScoped names opsdesk.%s, which is gone or has a tenant column now", name))
		}
	}
	for name := range referenceTables {
		if !tables[name] {
			problems = append(problems, fmt.Sprintf("referenceTables names opsdesk.%s, which is gone or has no tenant column", name))
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// keyProblems names every primary key, unique constraint, unique index and
// exclusion constraint of a tenant-scoped table whose key columns do not
// include tenant (an expression does not count: Citus needs the column).
func keyProblems(ctx context.Context, q tenantCheckQuerier) ([]string, error) {
	rows, err := q.Query(ctx, `
SELECT format('%s of opsdesk.%s does not include tenant: %s',
    coalesce((SELECT CASE x.contype WHEN 'p' THEN 'primary key ' WHEN 'u' THEN 'unique constraint ' ELSE 'exclusion constraint ' END
              || x.conname FROM pg_constraint x WHERE x.conindid = i.indexrelid AND x.contype IN ('p', 'u', 'x')),
             'unique index ' || ic.relname),
    c.relname, pg_get_indexdef(i.indexrelid))
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_attribute t ON t.attrelid = c.oid AND t.attname = 'tenant' AND t.attnum > 0 AND NOT t.attisdropped
WHERE c.relnamespace = 'opsdesk'::regnamespace
  AND (i.indisunique OR i.indisprimary OR i.indisexclusion)
  AND NOT EXISTS (SELECT FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n)
                  WHERE k.n <= i.indnkeyatts AND k.attnum = t.attnum)
ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// foreignKeyProblems names every foreign key that could join two tenants'
// rows: between tenant-scoped tables, one that does not pair the two
// tenant columns; from a table without tenant (or a reference table) to a
// distributed one, any (Citus refuses a foreign key from a reference or
// local table to a distributed one).
func foreignKeyProblems(ctx context.Context, q tenantCheckQuerier) ([]string, error) {
	refs := make([]string, 0, len(referenceTables))
	for name := range referenceTables {
		refs = append(refs, name)
	}
	rows, err := q.Query(ctx, `
WITH fk AS (
    SELECT con.conname, src.relname AS src, dst.relname AS dst, pg_get_constraintdef(con.oid) AS def,
        (SELECT attnum FROM pg_attribute WHERE attrelid = con.conrelid AND attname = 'tenant' AND attnum > 0 AND NOT attisdropped) AS src_tenant,
        (SELECT attnum FROM pg_attribute WHERE attrelid = con.confrelid AND attname = 'tenant' AND attnum > 0 AND NOT attisdropped) AS dst_tenant,
        con.conkey, con.confkey
    FROM pg_constraint con
    JOIN pg_class src ON src.oid = con.conrelid
    JOIN pg_class dst ON dst.oid = con.confrelid
    WHERE con.contype = 'f' AND (src.relnamespace = 'opsdesk'::regnamespace OR dst.relnamespace = 'opsdesk'::regnamespace)
)
SELECT format('foreign key %s of opsdesk.%s joins across tenants: %s', conname, src, def)
FROM fk
WHERE dst_tenant IS NOT NULL AND NOT dst = ANY ($1)
  AND (src_tenant IS NULL OR src = ANY ($1)
       OR NOT EXISTS (SELECT FROM generate_subscripts(conkey, 1) s
                      WHERE conkey[s] = src_tenant AND confkey[s] = dst_tenant))
ORDER BY 1`, refs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// plFunction is a function of schema opsdesk as the trigger check reads it.
type plFunction struct {
	name    string
	src     string
	secdef  bool
	trigger bool
}

// opsdeskFunctions returns schema opsdesk's functions by name (an
// overloaded name's bodies are joined: what one calls, the others may).
func opsdeskFunctions(ctx context.Context, q tenantCheckQuerier) (map[string]*plFunction, error) {
	rows, err := q.Query(ctx, `
SELECT p.proname::text, p.prosrc, p.prosecdef, p.prorettype = 'trigger'::regtype
FROM pg_proc p WHERE p.pronamespace = 'opsdesk'::regnamespace ORDER BY p.oid`)
	if err != nil {
		return nil, err
	}
	out := map[string]*plFunction{}
	var f plFunction
	_, err = pgx.ForEachRow(rows, []any{&f.name, &f.src, &f.secdef, &f.trigger}, func() error {
		if g, ok := out[f.name]; ok {
			g.src += ";\n" + f.src
			g.secdef = g.secdef || f.secdef
			return nil
		}
		g := f
		out[f.name] = &g
		return nil
	})
	return out, err
}

var (
	lineComment  = regexp.MustCompile(`--[^\n]*`)
	callPattern  = regexp.MustCompile(`(?i)\bopsdesk\.(\w+)\s*\(`)
	tableUse     = regexp.MustCompile(`(?i)\b(FROM|JOIN|INTO|UPDATE|USING|TABLE)\s+(?:ONLY\s+)?opsdesk\.(\w+)`)
	tenantEquals = regexp.MustCompile(`(?i)\btenant\s*=`)
	writePattern = regexp.MustCompile(`(?i)\b(?:INSERT\s+INTO|DELETE\s+FROM|UPDATE|MERGE\s+INTO)\s+(?:ONLY\s+)?opsdesk\.(\w+)`)
)

// statements splits a function body into statements, comments removed:
// crude (a semicolon in a string literal splits too), which is enough to
// find the statements that name a table.
func statements(src string) []string {
	return strings.Split(lineComment.ReplaceAllString(src, ""), ";")
}

// closure returns name and the opsdesk functions it calls, transitively.
func closure(fns map[string]*plFunction, name string) []string {
	seen := map[string]bool{name: true}
	queue := []string{name}
	for len(queue) > 0 {
		f := fns[queue[0]]
		queue = queue[1:]
		if f == nil {
			continue
		}
		for _, m := range callPattern.FindAllStringSubmatch(lineComment.ReplaceAllString(f.src, ""), -1) {
			if _, ok := fns[m[1]]; ok && !seen[m[1]] {
				seen[m[1]] = true
				queue = append(queue, m[1])
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// keyedByTenant tells whether a statement naming a tenant-scoped table
// names a tenant too: a tenant predicate (tenant = …, with any alias), or
// an INSERT whose column list has tenant. A tripwire, not a proof; the
// writes are proven by TestOneCallWritesOneTenant.
func keyedByTenant(stmt string) bool {
	if tenantEquals.MatchString(stmt) {
		return true
	}
	insert := regexp.MustCompile(`(?is)INSERT\s+INTO\s+opsdesk\.\w+(?:\s+AS\s+\w+)?\s*\(([^)]*)\)`)
	for _, m := range insert.FindAllStringSubmatch(stmt, -1) {
		if regexp.MustCompile(`(?i)\btenant\b`).MatchString(m[1]) {
			return true
		}
	}
	return false
}

// triggerProblems names each statement of a trigger function on a
// tenant-scoped table (or of a function it calls) that reads or writes a
// tenant-scoped table without a tenant predicate, unless unkeyedInTriggers
// names it; and each entry of unkeyedInTriggers that matches nothing.
// inventory lists every trigger with the functions it runs and the tables
// they write, for the test's log.
func triggerProblems(ctx context.Context, q tenantCheckQuerier) (problems, inventory []string, err error) {
	tables, err := tenantTables(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	fns, err := opsdeskFunctions(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	rows, err := q.Query(ctx, `
SELECT c.relname::text, g.tgname::text, p.proname::text, p.pronamespace = 'opsdesk'::regnamespace
FROM pg_trigger g
JOIN pg_class c ON c.oid = g.tgrelid
JOIN pg_proc p ON p.oid = g.tgfoid
JOIN pg_attribute t ON t.attrelid = c.oid AND t.attname = 'tenant' AND t.attnum > 0 AND NOT t.attisdropped
WHERE NOT g.tgisinternal AND c.relnamespace = 'opsdesk'::regnamespace
ORDER BY 1, 2`)
	if err != nil {
		return nil, nil, err
	}
	type trig struct{ table, name, fn string }
	var trigs []trig
	var tr trig
	var inOpsdesk bool
	_, err = pgx.ForEachRow(rows, []any{&tr.table, &tr.name, &tr.fn, &inOpsdesk}, func() error {
		if !inOpsdesk {
			problems = append(problems, fmt.Sprintf("trigger %s on opsdesk.%s runs %s, outside schema opsdesk, which this check cannot read", tr.name, tr.table, tr.fn))
			return nil
		}
		trigs = append(trigs, tr)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	used := map[[2]string]bool{}
	reported := map[string]bool{}
	for _, tr := range trigs {
		var writes []string
		for _, name := range closure(fns, tr.fn) {
			for _, stmt := range statements(fns[name].src) {
				for _, m := range tableUse.FindAllStringSubmatch(stmt, -1) {
					if !tables[m[2]] {
						continue
					}
					if w := writePattern.FindStringSubmatch(stmt); w != nil && !slices.Contains(writes, name+"→"+w[1]) {
						writes = append(writes, name+"→"+w[1])
					}
					if keyedByTenant(stmt) {
						continue
					}
					k := [2]string{name, m[2]}
					if _, ok := unkeyedInTriggers[k]; ok {
						used[k] = true
						continue
					}
					msg := fmt.Sprintf("trigger %s on opsdesk.%s runs %s, whose statement names opsdesk.%s without a tenant predicate: %s",
						tr.name, tr.table, name, m[2], strings.Join(strings.Fields(stmt), " "))
					if !reported[msg] {
						reported[msg] = true
						problems = append(problems, msg)
					}
				}
			}
		}
		sort.Strings(writes)
		inventory = append(inventory, fmt.Sprintf("%s on %s: %s writes %v", tr.name, tr.table, tr.fn, writes))
	}
	for k := range unkeyedInTriggers {
		if !used[k] {
			problems = append(problems, fmt.Sprintf("unkeyedInTriggers names %s on opsdesk.%s, which no trigger's statement matches now: remove it", k[0], k[1]))
		}
	}
	sort.Strings(problems)
	return problems, inventory, nil
}

// writingFunctions returns the SECURITY DEFINER functions of schema
// opsdesk, other than trigger functions, that write a table of the schema
// themselves or through a function they call: the ones people and
// services call to change the store.
func writingFunctions(ctx context.Context, q tenantCheckQuerier) ([]string, error) {
	fns, err := opsdeskFunctions(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []string
	for name, f := range fns {
		if !f.secdef || f.trigger {
			continue
		}
		for _, n := range closure(fns, name) {
			if writePattern.MatchString(lineComment.ReplaceAllString(fns[n].src, "")) {
				out = append(out, name)
				break
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func TestTenantIsInEveryKeyAndJoin(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()

	problems, err := tableProblems(ctx, d.Admin)
	require.NoError(t, err)
	require.Empty(t, problems)

	problems, err = keyProblems(ctx, d.Admin)
	require.NoError(t, err)
	require.Empty(t, problems)

	problems, err = foreignKeyProblems(ctx, d.Admin)
	require.NoError(t, err)
	require.Empty(t, problems)

	problems, inventory, err := triggerProblems(ctx, d.Admin)
	require.NoError(t, err)
	for _, line := range inventory {
		t.Log(line)
	}
	require.NotEmpty(t, inventory, "the check must have found the schema's triggers")
	require.Empty(t, problems)
}

// writeLog installs, in d's database only, a row-level trigger on every
// tenant-scoped table that records each written row's tenant (the old and
// the new row's for an UPDATE) with the writing transaction, and returns a
// function that runs one call and returns, per transaction it wrote in,
// the distinct tenants of distributed (not reference) tables it wrote.
func writeLog(t *testing.T, d *dbtest.DB) func(run func() error) ([][]string, error) {
	t.Helper()
	ctx := t.Context()
	_, err := d.Admin.Exec(ctx, `
CREATE SCHEMA tenantcheck;
CREATE UNLOGGED TABLE tenantcheck.writes (
    n bigint GENERATED ALWAYS AS IDENTITY, xact xid8 NOT NULL, tbl text NOT NULL, tenant text
);
CREATE FUNCTION tenantcheck.record() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO tenantcheck.writes (xact, tbl, tenant) VALUES (pg_current_xact_id(), TG_TABLE_NAME, NEW.tenant);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO tenantcheck.writes (xact, tbl, tenant) VALUES (pg_current_xact_id(), TG_TABLE_NAME, OLD.tenant);
    END IF;
    RETURN NULL;
END $$;
GRANT USAGE ON SCHEMA tenantcheck TO PUBLIC;
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c
        WHERE c.relnamespace = 'opsdesk'::regnamespace AND c.relkind IN ('r', 'p')
          AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant' AND NOT a.attisdropped)
    LOOP
        EXECUTE format('CREATE TRIGGER zz_tenantcheck AFTER INSERT OR UPDATE OR DELETE ON opsdesk.%I
            FOR EACH ROW EXECUTE FUNCTION tenantcheck.record()', t);
        EXECUTE format('ALTER TABLE opsdesk.%I ENABLE ALWAYS TRIGGER zz_tenantcheck', t);
    END LOOP;
END $$`)
	require.NoError(t, err)
	refs := make([]string, 0, len(referenceTables))
	for name := range referenceTables {
		refs = append(refs, name)
	}
	return func(run func() error) ([][]string, error) {
		var before int64
		if err := d.Admin.QueryRow(ctx, `SELECT coalesce(max(n), 0) FROM tenantcheck.writes`).Scan(&before); err != nil {
			return nil, err
		}
		if err := run(); err != nil {
			return nil, err
		}
		rows, err := d.Admin.Query(ctx, `
SELECT array_agg(DISTINCT tenant ORDER BY tenant) FILTER (WHERE NOT tbl = ANY ($2))
FROM tenantcheck.writes WHERE n > $1 GROUP BY xact ORDER BY min(n)`, before, refs)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[[]string])
	}
}

// widest returns the largest of the transactions' sets of tenants.
func widest(xacts [][]string) []string {
	var out []string
	for _, x := range xacts {
		if len(x) > len(out) {
			out = x
		}
	}
	return out
}

// call is one call of the scenario: the opsdesk function it exercises and,
// when one call may write more than one tenant's rows, why.
type call struct {
	name        string
	fn          string
	crossTenant string
	// noTenantRows says why the call writes no tenant-scoped table.
	noTenantRows string
	run          func(ctx context.Context) error
}

// TestOneCallWritesOneTenant runs a call of every SECURITY DEFINER
// function that writes (the catalog says which: one added later fails this
// test until a call of it is added here) over a store of two tenants, with
// every write to a tenant-scoped table recorded by a trigger installed only
// in this test's database, and fails when one call's transaction wrote
// more than one tenant's rows of distributed tables. The ” chain, the
// audit trail of events that are no tenant's (access, purges, refusals of
// records the person may not see), is a tenant of its own here: a call
// that writes tenant acme's rows and the ” chain crosses tenants too.
func TestOneCallWritesOneTenant(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	admin := dbtest.NewPerson(t, d, "admin", "*")
	newcomer := dbtest.NewPerson(t, d, "")

	_, err := d.Admin.Exec(ctx, `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner,
    leased_at, lease_expires_at, completed_at, expires_at, intent, result)
SELECT r.tenant, r.tool, r.key, '1', sha256(convert_to(r.tenant || r.key, 'UTF8')), r.effect, r.state, r.outcome, 'w',
    now() - interval '2 days', now() - interval '2 days' + interval '30 seconds', r.completed, r.expires,
    '{"n": 1}', CASE WHEN r.state = 'completed' THEN '{"ok": true}'::json END
FROM (VALUES
    ('acme', 'charge-card', 'stuck', 'external_unknown', 'pending', NULL, NULL::timestamptz, NULL::timestamptz),
    ('globex', 'charge-card', 'stuck', 'external_unknown', 'pending', NULL, NULL, NULL),
    ('acme', 'create-ticket', 'expired', 'local', 'completed', 'succeeded', now() - interval '2 days', now() - interval '1 day'),
    ('globex', 'create-ticket', 'expired', 'local', 'completed', 'succeeded', now() - interval '2 days', now() - interval '1 day'),
    ('acme', 'create-ticket', 'kept', 'local', 'completed', 'succeeded', now() - interval '2 days', now() + interval '30 days'),
    ('acme', 'create-ticket', 'kept-2', 'local', 'completed', 'succeeded', now() - interval '2 days', now() + interval '30 days'),
    ('globex', 'create-ticket', 'kept-2', 'local', 'completed', 'succeeded', now() - interval '2 days', now() + interval '30 days')
) AS r (tenant, tool, key, effect, state, outcome, completed, expires);
UPDATE opsdesk.operations SET conflict_count = 1, last_conflict_at = now() WHERE key = 'kept';
INSERT INTO opsdesk.conflicts (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, intent)
SELECT tenant, tool, key, id, '1', sha256('other'::bytea), fingerprint, 'w', '{"n": 2}' FROM opsdesk.operations WHERE key = 'kept';
INSERT INTO opsdesk.tombstones (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at)
VALUES ('acme', 'create-ticket', 'gone', 1000001, sha256('a'::bytea), now() - interval '9 days', now() - interval '1 day'),
       ('globex', 'create-ticket', 'gone', 1000002, sha256('g'::bytea), now() - interval '9 days', now() - interval '1 day')`)
	require.NoError(t, err)
	id := func(tenant, key string) int64 {
		var n int64
		require.NoError(t, d.Admin.QueryRow(ctx, `SELECT id FROM opsdesk.operations WHERE tenant = $1 AND key = $2`, tenant, key).Scan(&n))
		return n
	}
	var conflictID int64
	require.NoError(t, d.Admin.QueryRow(ctx, `SELECT id FROM opsdesk.conflicts WHERE tenant = 'acme'`).Scan(&conflictID))
	acmeStuck, globexStuck, acmeKept := id("acme", "stuck"), id("globex", "stuck"), id("acme", "kept")
	acmeKept2, globexKept2 := id("acme", "kept-2"), id("globex", "kept-2")

	// succeeded runs a function returning an outcome (and maybe a chain
	// and an entry) and fails unless it succeeded.
	var tenant string
	var entry, run int64
	succeeded := func(pool *pgxpool.Pool, sql string, args ...any) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			var outcome, message, chain pgtype.Text
			var e, r pgtype.Int8
			err := pool.QueryRow(ctx, sql, args...).Scan(&outcome, &message, &chain, &e, &r)
			if err != nil {
				return err
			}
			if outcome.String != "succeeded" {
				return fmt.Errorf("%s: %q %q", sql, outcome.String, message.String)
			}
			tenant, entry = chain.String, e.Int64
			if r.Valid {
				run = r.Int64
			}
			return nil
		}
	}
	decision := `SELECT outcome, message, tenant, entry, NULL::bigint FROM opsdesk.decide(p_id => $1, p_decision => $2,
    p_expect_version => 1, p_reason => 'checked with the provider', p_evidence_summary => 'no charge',
    p_snooze_until => now() + interval '1 hour')`
	purge := `SELECT outcome, message, tenant, entry, run FROM `
	calls := []call{
		{name: "decide: not executed", fn: "decide", run: succeeded(admin.Pool, decision, acmeStuck, "not-executed")},
		{name: "decide: defer", fn: "decide", run: succeeded(admin.Pool, decision, globexStuck, "defer")},
		{name: "decide: a record nobody has, refused on the '' chain", fn: "decide", run: func(ctx context.Context) error {
			_, err := admin.Pool.Exec(ctx, `SELECT opsdesk.decide(999999, 'failed', 1, 'no such record')`)
			return err
		}},
		{name: "ack_conflicts", fn: "ack_conflicts", run: succeeded(admin.Pool,
			`SELECT outcome, message, tenant, entry, NULL::bigint FROM opsdesk.ack_conflicts($1, ARRAY[$2::bigint], 'seen')`, acmeKept, conflictID)},
		{name: "reveal_request", fn: "reveal_request", run: succeeded(admin.Pool,
			`SELECT outcome, message, tenant, entry, NULL::bigint FROM opsdesk.reveal_request($1, 'intent', 'support case')`, acmeKept)},
		{name: "reveal_fetch", fn: "reveal_fetch", run: func(ctx context.Context) error {
			_, err := admin.Pool.Exec(ctx, `SELECT opsdesk.reveal_fetch($1, $2)`, tenant, entry)
			return err
		}},
		{name: "reveal_conflict_request", fn: "reveal_conflict_request", run: succeeded(admin.Pool,
			`SELECT outcome, message, tenant, entry, NULL::bigint FROM opsdesk.reveal_conflict_request($1, 'support case')`, conflictID)},
		{name: "reveal_conflict_fetch", fn: "reveal_conflict_fetch", run: func(ctx context.Context) error {
			_, err := admin.Pool.Exec(ctx, `SELECT opsdesk.reveal_conflict_fetch($1, $2)`, tenant, entry)
			return err
		}},
		{name: "set_hold: one tenant's record", fn: "set_hold", run: succeeded(admin.Pool,
			`SELECT outcome, message, audit_tenant, audit_entry, NULL::bigint FROM opsdesk.set_hold(ARRAY[$1::bigint], true, 'legal hold')`, acmeKept)},
		{name: "set_hold: two tenants' records", fn: "set_hold",
			crossTenant: "an admin of every tenant may hold records of several tenants in one call (opsdesk hold with a list); " +
				"each record is updated and audited on its own tenant's chain, all in one transaction: on Citus a multi-shard " +
				"transaction (two-phase commit), or one call per tenant",
			run: succeeded(admin.Pool,
				`SELECT outcome, message, audit_tenant, audit_entry, NULL::bigint FROM opsdesk.set_hold(ARRAY[$1::bigint, $2], true, 'legal hold')`, acmeKept2, globexKept2)},
		{name: "grant_access", fn: "grant_access", run: succeeded(admin.Pool,
			`SELECT outcome, message, tenant, entry, NULL::bigint FROM opsdesk.grant_access($1, 'viewer', 'acme', 'joined the team')`, newcomer.Role)},
		{name: "set_auto_reconcile", fn: "set_auto_reconcile", run: succeeded(admin.Pool,
			`SELECT outcome, message, tenant, entry, NULL::bigint FROM opsdesk.set_auto_reconcile('charge-card', ARRAY['found'], 'owners agreed')`)},
		{name: "set_reconciler_pause", fn: "set_reconciler_pause", run: succeeded(admin.Pool,
			`SELECT outcome, message, tenant, entry, NULL::bigint FROM opsdesk.set_reconciler_pause(true, 'provider incident')`)},
		{name: "record_tool_policy", fn: "record_tool_policy",
			noTenantRows: "a service's declaration of a tool, the same for every tenant: it writes tool_policies (a reference table) and no audit",
			run: func(ctx context.Context) error {
				_, err := d.Service.Exec(ctx, `SELECT opsdesk.record_tool_policy('create-ticket', 'local', 30000000, 86400000000, 86400000000, 'reexecute')`)
				return err
			}},
		{name: "start_batch", fn: "start_batch",
			noTenantRows: "a run's start: it writes batches (a reference table) and no audit; the run's decisions are audited",
			run: func(ctx context.Context) error {
				_, err := admin.Pool.Exec(ctx, `SELECT opsdesk.start_batch('state:stuck tool:charge-card')`)
				return err
			}},
		{name: "purge_start", fn: "purge_start", run: succeeded(admin.Pool,
			purge+`opsdesk.purge_start(NULL, NULL, '{"*": 3600}', 'retention', 100)`)},
		{name: "purge_batch", fn: "purge_batch",
			crossTenant: "retention purges every tenant's expired records in expiry order, a batch at a time; on Citus each " +
				"batch is a multi-shard DELETE, or the purge runs per tenant (docs/scaling.md)",
			run: func(ctx context.Context) error {
				return succeeded(admin.Pool, purge+`opsdesk.purge_batch($1, 100)`, run)(ctx)
			}},
		{name: "purge_tombstones", fn: "purge_tombstones",
			crossTenant: "expired tombstones of every tenant go in one batch, as purge_batch's records do",
			run: func(ctx context.Context) error {
				return succeeded(admin.Pool, purge+`opsdesk.purge_tombstones($1, 100)`, run)(ctx)
			}},
		{name: "purge_finish", fn: "purge_finish", run: func(ctx context.Context) error {
			return succeeded(admin.Pool, purge+`opsdesk.purge_finish($1)`, run)(ctx)
		}},
		{name: "audit_seal", fn: "audit_seal",
			crossTenant: "the sequencer seals every chain with queued entries in one call and one transaction (each chain " +
				"under its own head's lock); on Citus it would seal chain by chain, one transaction per tenant (docs/scaling.md)",
			run: func(ctx context.Context) error {
				_, err := admin.Pool.Exec(ctx, `SELECT opsdesk.audit_seal()`)
				return err
			}},
		{name: "record_conflicts_refresh", fn: "record_conflicts_refresh", run: func(ctx context.Context) error {
			_, err := d.Admin.Exec(ctx, `SELECT opsdesk.record_conflicts_refresh('acme', 'create-ticket', 'kept')`)
			return err
		}},
	}

	record := writeLog(t, d)
	exercised := map[string]bool{}
	for _, c := range calls {
		xacts, err := record(func() error { return c.run(ctx) })
		require.NoError(t, err, c.name)
		if c.noTenantRows == "" {
			require.NotEmpty(t, xacts, "%s wrote no tenant's rows: the scenario no longer exercises %s", c.name, c.fn)
		} else {
			require.Empty(t, xacts, "%s is listed as writing no tenant's rows (%s)", c.name, c.noTenantRows)
		}
		exercised[c.fn] = true
		w := widest(xacts)
		t.Logf("%s: %d transaction(s), tenants %q", c.name, len(xacts), w)
		if c.crossTenant == "" {
			require.LessOrEqual(t, len(w), 1, "%s (opsdesk.%s) wrote the rows of more than one tenant in one transaction: %q", c.name, c.fn, w)
		} else {
			require.Greater(t, len(w), 1, "%s (opsdesk.%s) is listed as writing several tenants (%s) but wrote %q: "+
				"remove its exception", c.name, c.fn, c.crossTenant, w)
		}
	}

	writers, err := writingFunctions(ctx, d.Admin)
	require.NoError(t, err)
	require.NotEmpty(t, writers)
	for _, fn := range writers {
		require.True(t, exercised[fn], "opsdesk.%s is SECURITY DEFINER and writes: add a call of it to this test", fn)
	}
}

// requireProblems requires problems to be as many as want, the i-th
// containing want[i].
func requireProblems(t *testing.T, problems []string, err error, want ...string) {
	t.Helper()
	require.NoError(t, err)
	require.Len(t, problems, len(want), "%q", problems)
	for i, w := range want {
		require.Contains(t, problems[i], w)
	}
}

// TestTenantCheckerCatchesABrokenSchema breaks a database of its own the
// ways the checks look for and requires each check to name the break.
func TestTenantCheckerCatchesABrokenSchema(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	_, err := d.Admin.Exec(ctx, `
CREATE TABLE opsdesk.no_tenant (id bigint PRIMARY KEY);
CREATE TABLE opsdesk.bad_keys (tenant text NOT NULL, id bigint PRIMARY KEY, code text, other bigint,
    CONSTRAINT bad_keys_code UNIQUE (code));
CREATE UNIQUE INDEX bad_keys_lower ON opsdesk.bad_keys (lower(tenant), other);
CREATE UNIQUE INDEX bad_keys_included ON opsdesk.bad_keys (other) INCLUDE (tenant);
CREATE UNIQUE INDEX bad_keys_good ON opsdesk.bad_keys (other, tenant);
CREATE TABLE opsdesk.bad_children (tenant text NOT NULL, parent bigint, op_tenant text, op_tool text, op_key text,
    PRIMARY KEY (tenant, parent),
    CONSTRAINT bad_children_parent FOREIGN KEY (parent) REFERENCES opsdesk.bad_keys (id),
    CONSTRAINT bad_children_swapped FOREIGN KEY (op_tenant, op_tool, op_key) REFERENCES opsdesk.operations (tenant, tool, key));
CREATE TABLE opsdesk.global_children (operation_tenant text, tool text, key text,
    CONSTRAINT global_children_operation FOREIGN KEY (operation_tenant, tool, key) REFERENCES opsdesk.operations (tenant, tool, key));
CREATE FUNCTION opsdesk.bad_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE opsdesk.tombstones SET expires_at = now() WHERE key = NEW.key;
    RETURN NULL;
END $$;
CREATE TRIGGER bad_touch AFTER INSERT ON opsdesk.operations FOR EACH ROW EXECUTE FUNCTION opsdesk.bad_touch();
CREATE FUNCTION opsdesk.bad_fanout() RETURNS void LANGUAGE sql SECURITY DEFINER AS $$
    INSERT INTO opsdesk.bad_keys (tenant, id) VALUES ('acme', 1), ('globex', 2);
$$`)
	require.NoError(t, err)

	problems, err := tableProblems(ctx, d.Admin)
	requireProblems(t, problems, err, "opsdesk.global_children has no tenant column", "opsdesk.no_tenant has no tenant column")
	problems, err = keyProblems(ctx, d.Admin)
	requireProblems(t, problems, err, "primary key bad_keys_pkey of opsdesk.bad_keys",
		"unique constraint bad_keys_code of opsdesk.bad_keys", "unique index bad_keys_included of opsdesk.bad_keys",
		"unique index bad_keys_lower of opsdesk.bad_keys")
	problems, err = foreignKeyProblems(ctx, d.Admin)
	requireProblems(t, problems, err, "foreign key bad_children_parent of opsdesk.bad_children",
		"foreign key bad_children_swapped of opsdesk.bad_children", "foreign key global_children_operation of opsdesk.global_children")
	problems, _, err = triggerProblems(ctx, d.Admin)
	requireProblems(t, problems, err,
		"trigger bad_touch on opsdesk.operations runs bad_touch, whose statement names opsdesk.tombstones without a tenant predicate")

	writers, err := writingFunctions(ctx, d.Admin)
	require.NoError(t, err)
	require.Contains(t, writers, "bad_fanout")

	_, err = d.Admin.Exec(ctx, `DROP TRIGGER bad_touch ON opsdesk.operations`)
	require.NoError(t, err)
	record := writeLog(t, d)
	xacts, err := record(func() error {
		_, err := d.Admin.Exec(ctx, `SELECT opsdesk.bad_fanout()`)
		return err
	})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"acme", "globex"}}, xacts)
}
