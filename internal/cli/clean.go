package cli

import (
	"fmt"

	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ui"
)

// Every command's text output goes through termtext.Clean, the console's
// own cleaning, field by field: a tenant, tool, key, owner, role or
// reference is written by services and people, and an escape sequence in
// one would otherwise reach the operator's terminal. termtext.CleanLines
// is the same for a message of several lines (an error), line by line.
// JSON output stays exact: writeJSON escapes what encoding/json leaves raw
// (termtext.EscapeControls).
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
// (ui.Cut, more saying how to see the rest), cleaned (termtext.Clean).
func shown(s string, n int, more string) string { return termtext.Clean(ui.Cut(s, n, more)) }

// opsShowMore says how to see a field of record id whole.
func opsShowMore(id int64) string {
	return fmt.Sprintf("opsdesk ops show %d -o json prints it whole.", id)
}
