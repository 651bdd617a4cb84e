package db_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
)

// schemaFile is the schema's current state, generated from the
// migrations: each table, index, policy, grant and function once, as it
// is now. A migration's review shows its real effect as this file's diff.
const schemaFile = "schema.sql"

var updateSchema = flag.Bool("update-schema", false, "rewrite "+schemaFile+" from the migrations")

// TestSchemaFileIsTheMigratedSchema: schema.sql, loaded into an empty
// database, gives exactly the schema the migrations give. Both sides are
// compared after one round trip through pg_dump and a load (PostgreSQL
// deparses some expressions differently once reparsed), with the same
// pg_dump, so that the check holds on any server version. A migration
// without its schema.sql fails here; `go test ./internal/db -run
// TestSchemaFile -update-schema` rewrites it.
func TestSchemaFileIsTheMigratedSchema(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	migrated := dumpSchema(t, d.AdminDSN)
	if *updateSchema {
		require.NoError(t, os.WriteFile(schemaFile, []byte(migrated), 0o644))
	}
	committed, err := os.ReadFile(schemaFile)
	require.NoError(t, err, "run: go test ./internal/db -run TestSchemaFile -update-schema")

	want := schemaObjects(dumpSchema(t, loaded(t, migrated, "the migrated schema")))
	got := schemaObjects(dumpSchema(t, loaded(t, string(committed), schemaFile)))
	require.NotEmpty(t, want)
	if diff := objectsDiff(want, got); diff != "" {
		t.Fatalf("%s has drifted from the migrations:\n%s\nrun go test ./internal/db -run TestSchemaFile -update-schema, "+
			"and review its diff with the migration", schemaFile, diff)
	}
}

// loaded is the admin DSN of an empty database that schema was loaded into.
func loaded(t *testing.T, schema, what string) string {
	t.Helper()
	dsn, drop, err := dbtest.CreateEmpty(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = drop() })
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), schema) // no arguments: the simple protocol, every statement
	require.NoError(t, err, "%s does not load; run: go test ./internal/db -run TestSchemaFile -update-schema", what)
	return dsn
}

// objectsDiff names the objects only one side has, and shows both
// versions of the ones that differ; "" when none do.
func objectsDiff(want, got []string) string {
	byName := func(objs []string) map[string]string {
		m := map[string]string{}
		for _, o := range objs {
			name, _, _ := strings.Cut(o, "\n")
			m[name] = o
		}
		return m
	}
	w, g := byName(want), byName(got)
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(w)) {
		switch other, ok := g[name]; {
		case !ok:
			fmt.Fprintf(&b, "in the migrations, not in the file: %s\n", name)
		case other != w[name]:
			fmt.Fprintf(&b, "differs: %s\n--- the migrations:\n%s\n--- the file:\n%s\n", name, w[name], other)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(g)) {
		if _, ok := w[name]; !ok {
			fmt.Fprintf(&b, "in the file, not in the migrations: %s\n", name)
		}
	}
	return b.String()
}

// TestSchemaFileDefinesEachFunctionOnce: the file shows a function's one
// current definition, never a superseded copy.
func TestSchemaFileDefinesEachFunctionOnce(t *testing.T) {
	t.Parallel()
	committed, err := os.ReadFile(schemaFile)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^CREATE FUNCTION (opsdesk\.[a-z_0-9]+\([^)]*\))`).FindAllSubmatch(committed, -1) {
		seen[string(m[1])]++
	}
	require.NotEmpty(t, seen)
	for fn, n := range seen {
		require.Equal(t, 1, n, "%s is defined %d times in %s", fn, n, schemaFile)
	}
	require.Equal(t, 1, bytes.Count(committed, []byte("CREATE FUNCTION opsdesk.decide(")), "decide once")
}

// dumpSchema is pg_dump's schema of the database at dsn, normalised: no
// owners, no version banner, no \restrict keys (random per dump). Its
// session settings stay: they are what lets the file load.
func dumpSchema(t *testing.T, dsn string) string {
	t.Helper()
	bin, err := pgcluster.FindBinDir()
	require.NoError(t, err, "pg_dump comes with the server binaries (README, Prerequisites)")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--schema-only", "--no-owner", "--no-comments",
		"--exclude-table=public.goose_db_version", "--dbname="+dsn)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "pg_dump: %s", stderr.String())
	return normaliseDump(string(out))
}

func normaliseDump(dump string) string {
	var b strings.Builder
	b.WriteString("-- The schema's current state, generated from the migrations by\n" +
		"-- TestSchemaFileIsTheMigratedSchema (internal/db/schema_test.go): do not edit.\n" +
		"-- After a migration: go test ./internal/db -run TestSchemaFile -update-schema\n")
	blank := true
	for _, line := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(line, `\restrict`), strings.HasPrefix(line, `\unrestrict`),
			strings.HasPrefix(line, "-- Dumped "), line == "--", line == "-- PostgreSQL database dump", line == "-- PostgreSQL database dump complete":
			continue
		case strings.TrimSpace(line) == "":
			if blank {
				continue
			}
			blank = true
		default:
			blank = false
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// schemaObjects splits a normalised dump into its objects (each begins
// with pg_dump's "-- Name: …" line), sorted: pg_dump orders some objects
// by their oids, which differ between two databases of the same schema.
func schemaObjects(dump string) []string {
	var out []string
	for i, part := range strings.Split(dump, "\n-- Name: ") {
		if i == 0 {
			continue // the banner
		}
		out = append(out, strings.TrimSpace(part))
	}
	slices.Sort(out)
	return out
}

// TestSchemaObjectsSeeADifference: the comparison is not blind to a
// changed function body, a dropped index or a new grant.
func TestSchemaObjectsSeeADifference(t *testing.T) {
	t.Parallel()
	base := "-- banner\n\n-- Name: f; Type: FUNCTION\nCREATE FUNCTION opsdesk.f() RETURNS int AS $$ SELECT 1 $$;\n\n" +
		"-- Name: i; Type: INDEX\nCREATE INDEX i ON opsdesk.t (a);\n"
	for _, changed := range []string{
		strings.Replace(base, "SELECT 1", "SELECT 2", 1),
		strings.Replace(base, "-- Name: i; Type: INDEX\nCREATE INDEX i ON opsdesk.t (a);\n", "", 1),
		base + "\n-- Name: g; Type: ACL\nGRANT SELECT ON opsdesk.t TO nobody;\n",
	} {
		require.NotEmpty(t, objectsDiff(schemaObjects(normaliseDump(base)), schemaObjects(normaliseDump(changed))), "%q", changed)
	}
	require.Empty(t, objectsDiff(schemaObjects(normaliseDump(base)), schemaObjects(normaliseDump("\\restrict abc\n-- Dumped from database version 15\n"+base))))
}
