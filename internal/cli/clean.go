package cli

import (
	"strconv"
	"strings"
	"unicode/utf8"

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

// escapeControls escapes, in encoded JSON, the control characters
// encoding/json and PostgreSQL's jsonb output leave raw: DEL and the C1
// controls (U+0080 to U+009F; U+009B is a terminal's one-byte CSI). They
// can only stand inside strings, where \u00XX is the same value.
func escapeControls(b []byte) []byte {
	clean := true
	for i := 0; i < len(b); i++ {
		if b[i] == 0x7f || b[i] == 0xc2 {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			out = append(out, `\u00`...)
			out = append(out, strconv.FormatInt(int64(r)|0x100, 16)[1:]...)
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}
