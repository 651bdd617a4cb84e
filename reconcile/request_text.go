package reconcile

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/opsdesk/opsdesk/internal/termtext"
)

// The words of a revealed conflict that `opsdesk conflicts show --reveal`
// prints and the console shows, written once so that both say the same.
// They are not cleaned for a terminal: a caller still passes them through
// its own cleaning (termtext.Clean), after the escaping done here.

// DiffMark is the one-character mark of a line or a field that differs:
// "~" changed, "-" only in the original, "+" only in the attempt; " "
// for a line that does not differ.
func DiffMark(k DiffKind) string {
	switch k {
	case DiffChanged:
		return "~"
	case DiffRemoved:
		return "-"
	case DiffAdded:
		return "+"
	}
	return " "
}

// maxIndent bounds the indentation of a request's lines (levels): deeper
// lines are indented no further, so 10,000 levels do not print 20,000
// spaces a line.
const maxIndent = 24

// Indent is the line's indentation: two spaces a level, at most
// maxIndent levels.
func (l RequestLine) Indent() string { return strings.Repeat("  ", min(l.Depth, maxIndent)) }

// Shown is the line's text as printed: JSON text with the characters JSON
// leaves raw escaped (EscapeControls).
func (l RequestLine) Shown() string { return string(termtext.EscapeControls([]byte(l.Text))) }

// PointerText shows a JSON Pointer as it is when it is printable ASCII
// without spaces or quotes, else as a JSON string (escaped by
// EscapeControls): a key with a control character, a space or a
// look-alike letter is not taken for another.
func PointerText(p string) string {
	plain := p != ""
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c > '~' || c == '"' {
			plain = false
			break
		}
	}
	if plain {
		return p
	}
	q, _ := json.Marshal(p) // a string always encodes
	return string(termtext.EscapeControls(q))
}

// ValueText is a differing field's value in a list of differences: its
// JSON text (escaped by EscapeControls), cut after maxBytes with its
// size, or "(absent)" on the side without the field.
func ValueText(v json.RawMessage, maxBytes int) string {
	if v == nil {
		return "(absent)"
	}
	s := string(termtext.EscapeControls(v))
	if len(s) > maxBytes {
		n := maxBytes
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = fmt.Sprintf("%s… (%d bytes)", s[:n], len(v))
	}
	return s
}
