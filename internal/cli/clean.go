package cli

import (
	"fmt"
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
//
// Stored text is also cut before it is cleaned, as the console cuts it
// (ui.Cut): a service may write an owner or a result reference of any
// size, and a 1 MiB owner made ops list print 50 MB. What is cut says how
// many bytes it left out and which command prints the value whole (-o
// json, which stays whole and exact).

// Bounds of one stored value in text output.
const (
	// cellBytes bounds a value in a table or a list line: every key
	// (ops.MaxKeyBytes) shows whole.
	cellBytes = 256
	// fieldBytes bounds a field of one record shown alone (ops show), a
	// reason, a summary, a line of a revealed request.
	fieldBytes = 4 << 10
)

// shown is stored text s as text output prints it: its first n bytes
// (ui.Cut, more saying how to see the rest), cleaned (ui.Clean).
func shown(s string, n int, more string) string { return ui.Clean(ui.Cut(s, n, more)) }

// opsShowMore says how to see a field of record id whole.
func opsShowMore(id int64) string {
	return fmt.Sprintf("opsdesk ops show %d -o json prints it whole.", id)
}

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
