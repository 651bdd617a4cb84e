package cli

import (
	"strings"

	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/ui"
)

// Every command's text output goes through ui.Clean, the console's own
// cleaning, field by field: a tenant, tool, key, owner, role or reference
// is written by services and people, and an escape sequence in one would
// otherwise reach the operator's terminal. cleanLines is the same for a
// message of several lines (an error), line by line. JSON output stays
// exact: writeJSON escapes what encoding/json leaves raw (escapeControls).

// cleanLines is ui.Clean on each line of s, keeping the line breaks.
func cleanLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = ui.Clean(l)
	}
	return strings.Join(lines, "\n")
}

// escapeControls escapes, in encoded JSON, what encoding/json and
// PostgreSQL's jsonb output leave raw that a terminal acts on
// (reconcile.EscapeControls).
func escapeControls(b []byte) []byte { return reconcile.EscapeControls(b) }
