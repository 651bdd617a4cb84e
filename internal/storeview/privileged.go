package storeview

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PrivilegeClass is a way past the guarantees the database enforces: a
// login of any class can forge audit records, give itself every tenant
// or rewrite completed records, directly or by making itself able to.
type PrivilegeClass string

// The classes, in the order they are reported.
const (
	// ClassSuperuser: SUPERUSER, or a member of pg_execute_server_program,
	// pg_write_server_files or pg_read_server_files, which PostgreSQL's
	// documentation warns can be used to gain superuser-level access.
	ClassSuperuser PrivilegeClass = "superuser"
	// ClassTableOwner owns opsdesk's schema or one of its tables (the
	// migrating role): it may disable triggers and policies.
	ClassTableOwner PrivilegeClass = "table_owner"
	// ClassOpsdeskOwner is a member of opsdesk_owner, which owns the
	// people's functions and may write every table they write.
	ClassOpsdeskOwner PrivilegeClass = "opsdesk_owner"
	// ClassCreateRole has CREATEROLE on PostgreSQL before 16, where it may
	// grant itself any role but a superuser's, opsdesk_owner included.
	ClassCreateRole PrivilegeClass = "createrole"
	// ClassWriteAllData is a member of pg_write_all_data: it may write
	// opsdesk.access, which has no row-level security, and so give any
	// person every tenant.
	ClassWriteAllData PrivilegeClass = "write_all_data"
)

// PrivilegeClasses lists every class, in the order they are reported.
var PrivilegeClasses = []PrivilegeClass{ClassSuperuser, ClassTableOwner, ClassOpsdeskOwner, ClassCreateRole, ClassWriteAllData}

// PrivilegedLogin is a login role of one class.
type PrivilegedLogin struct {
	Class PrivilegeClass `json:"class"`
	Login string         `json:"login"`
	// Via are the roles the login is of the class through, from the one
	// it is a member of to the one that holds the privilege (NOLOGIN
	// roles included); empty when the login holds it itself. A login of
	// the class through several chains is listed once, by a shortest.
	Via []string `json:"via,omitempty"`
}

// privilegedSQL finds the roles that hold each class's privilege, then
// every role that is a member of one, directly or through other roles
// (pg_auth_members, recursively), and keeps the login roles. Membership
// counts whether or not it is inherited: a member may SET ROLE. The
// catalogs it reads are readable by every role.
const privilegedSQL = `
WITH RECURSIVE holders (class, holder) AS (
    SELECT 'superuser', oid FROM pg_catalog.pg_roles
    WHERE rolsuper OR rolname IN ('pg_execute_server_program', 'pg_write_server_files', 'pg_read_server_files')
  UNION
    SELECT 'table_owner', nspowner FROM pg_catalog.pg_namespace WHERE nspname = 'opsdesk'
  UNION
    SELECT 'table_owner', c.relowner FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'opsdesk' AND c.relkind IN ('r', 'p')
  UNION
    SELECT 'opsdesk_owner', oid FROM pg_catalog.pg_roles WHERE rolname = 'opsdesk_owner'
  UNION
    SELECT 'createrole', oid FROM pg_catalog.pg_roles
    WHERE rolcreaterole AND pg_catalog.current_setting('server_version_num')::int < 160000
  UNION
    SELECT 'write_all_data', oid FROM pg_catalog.pg_roles WHERE rolname = 'pg_write_all_data'
), members (class, member, via) AS (
    SELECT class, holder, '{}'::oid[] FROM holders
  UNION ALL
    SELECT m.class, a.member, a.roleid || m.via
    FROM members m JOIN pg_catalog.pg_auth_members a ON a.roleid = m.member
    WHERE cardinality(m.via) < 32
)
SELECT DISTINCT ON (m.class, r.rolname) m.class, r.rolname::text,
    ARRAY(SELECT v.rolname::text FROM unnest(m.via) WITH ORDINALITY u (oid, n) JOIN pg_catalog.pg_roles v ON v.oid = u.oid ORDER BY u.n)
FROM members m JOIN pg_catalog.pg_roles r ON r.oid = m.member
WHERE r.rolcanlogin
ORDER BY m.class, r.rolname, cardinality(m.via)`

// PrivilegedLogins lists the login roles of every class, by class (in
// PrivilegeClasses' order) and name; a superuser only as a superuser.
// Any role may ask.
func (s *Store) PrivilegedLogins(ctx context.Context) ([]PrivilegedLogin, error) {
	rows, err := s.pool.Query(ctx, privilegedSQL)
	if err != nil {
		return nil, fmt.Errorf("list the privileged logins: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PrivilegedLogin])
	if err != nil {
		return nil, fmt.Errorf("list the privileged logins: %w", err)
	}
	// A superuser is every class: it is listed, and counted, once.
	super := map[string]bool{}
	for _, l := range found {
		if l.Class == ClassSuperuser {
			super[l.Login] = true
		}
	}
	out := make([]PrivilegedLogin, 0, len(found))
	for _, class := range PrivilegeClasses {
		for _, l := range found {
			if l.Class == class && (class == ClassSuperuser || !super[l.Login]) {
				out = append(out, l)
			}
		}
	}
	return out, nil
}
