package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/internal/termtext"
)

// privilegedClassWords say who each class is, for doctor and migrate.
var privilegedClassWords = map[storeview.PrivilegeClass]string{
	storeview.ClassSuperuser:    "superusers (or able to become one)",
	storeview.ClassTableOwner:   "owners of opsdesk's schema or tables (the migrating role)",
	storeview.ClassOpsdeskOwner: "members of opsdesk_owner",
	storeview.ClassCreateRole:   "CREATEROLE (PostgreSQL before 16: may grant itself opsdesk_owner)",
	storeview.ClassWriteAllData: "members of pg_write_all_data (may write opsdesk.access)",
}

// privilegedReport says which logins can bypass what the database
// enforces: a headline, then a line per class that has any, each login
// with the roles it is of the class through. Names are cleaned.
func privilegedReport(logins []storeview.PrivilegedLogin) (head string, lines []string) {
	if len(logins) == 0 {
		return "no login can bypass what the database enforces", nil
	}
	unique := map[string]bool{}
	byClass := map[storeview.PrivilegeClass][]string{}
	for _, l := range logins {
		unique[l.Login] = true
		name := l.Login
		if len(l.Via) > 0 {
			name += " (through " + strings.Join(l.Via, " → ") + ")"
		}
		byClass[l.Class] = append(byClass[l.Class], termtext.Clean(name))
	}
	for _, class := range storeview.PrivilegeClasses {
		if names := byClass[class]; len(names) > 0 {
			lines = append(lines, privilegedClassWords[class]+": "+strings.Join(names, ", "))
		}
	}
	noun := "logins"
	if len(unique) == 1 {
		noun = "login"
	}
	head = fmt.Sprintf("%d %s can bypass what the database enforces: forge audit records, give any role every tenant, "+
		"rewrite completed records (README: Known limits)", len(unique), noun)
	return head, lines
}

// doctorPrivileged warns about the logins that can bypass the database.
func doctorPrivileged(ctx context.Context, view *storeview.Store, out *doctorOut) {
	check := out.check
	logins, err := view.PrivilegedLogins(ctx)
	if err != nil {
		check(false, "privileged", err.Error())
		return
	}
	head, lines := privilegedReport(logins)
	if len(lines) == 0 {
		check(true, "privileged", head)
		return
	}
	for _, line := range append([]string{head}, lines...) {
		out.add("warning", "privileged", line)
	}
}

// warnPrivileged writes migrate's warning about the same logins.
func warnPrivileged(ctx context.Context, view *storeview.Store, w io.Writer) {
	logins, err := view.PrivilegedLogins(ctx)
	if err != nil {
		fmt.Fprintln(w, "warning: could not list the logins that can bypass the database:", termtext.CleanLines(err.Error()))
		return
	}
	head, lines := privilegedReport(logins)
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "warning:", head)
	for _, line := range lines {
		fmt.Fprintln(w, "  "+line)
	}
}
