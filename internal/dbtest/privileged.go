package dbtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Bypassers are login roles that can bypass what the database enforces,
// one of each way (the README's known limits), made by the superuser in
// d's cluster for tests of what warns about them. All are dropped when t
// ends. Roles are cluster-wide: a test that counts them must be the only
// one in its package that makes such logins, on a database of
// NewOnOwnCluster (make test's packages share one server).
type Bypassers struct {
	CreateRole *Person // CREATEROLE
	// Nested is a member of Group, a NOLOGIN member of opsdesk_owner.
	Nested *Person
	Group  string
	Super  *Person // SUPERUSER
	// TableOwner owns opsdesk.tombstones in d's database.
	TableOwner   *Person
	WriteAllData *Person // a member of pg_write_all_data
	// PrePG16: the server is older than PostgreSQL 16, where CREATEROLE
	// may grant any role but a superuser's.
	PrePG16 bool
}

// NewBypassers makes one login of each kind in d.
func NewBypassers(t testing.TB, d *DB) Bypassers {
	t.Helper()
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if _, err := d.Admin.Exec(ctx, sql); err != nil {
			t.Fatalf("dbtest: %s: %v", sql, err)
		}
	}
	ident := func(name string) string { return pgx.Identifier{name}.Sanitize() }
	var b Bypassers
	var version int
	if err := d.Admin.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatalf("dbtest: server version: %v", err)
	}
	b.PrePG16 = version < 160000

	b.CreateRole = NewPerson(t, d, "")
	exec(`ALTER ROLE ` + ident(b.CreateRole.Role) + ` CREATEROLE`)

	b.Nested = NewPerson(t, d, "")
	b.Group = b.Nested.Role + "_grp"
	exec(`CREATE ROLE ` + ident(b.Group) + ` NOLOGIN IN ROLE opsdesk_owner`)
	t.Cleanup(func() { _, _ = d.Admin.Exec(context.Background(), `DROP ROLE IF EXISTS `+ident(b.Group)) })
	exec(`GRANT ` + ident(b.Group) + ` TO ` + ident(b.Nested.Role))

	b.Super = NewPerson(t, d, "")
	exec(`ALTER ROLE ` + ident(b.Super.Role) + ` SUPERUSER`)

	b.TableOwner = NewPerson(t, d, "")
	exec(`ALTER TABLE opsdesk.tombstones OWNER TO ` + ident(b.TableOwner.Role))
	// Before its login is dropped: cleanups run last first.
	t.Cleanup(func() {
		_, _ = d.Admin.Exec(context.Background(), `REASSIGN OWNED BY `+ident(b.TableOwner.Role)+` TO CURRENT_USER`)
	})

	b.WriteAllData = NewPerson(t, d, "")
	exec(`GRANT pg_write_all_data TO ` + ident(b.WriteAllData.Role))
	return b
}
