package reconcile

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The words of a revealed conflict that `opsdesk conflicts show --reveal`
// prints and the console shows, written once so that both say the same.
// They are not cleaned for a terminal: a caller still passes them through
// its own cleaning (ui.Clean), after the escaping done here.

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

// MaxIndent bounds the indentation of a request's lines (levels): deeper
// lines are indented no further, so 10,000 levels do not print 20,000
// spaces a line.
const MaxIndent = 24

// Indent is the line's indentation: two spaces a level, at most
// MaxIndent levels.
func (l RequestLine) Indent() string { return strings.Repeat("  ", min(l.Depth, MaxIndent)) }

// Shown is the line's text as printed: JSON text with the characters JSON
// leaves raw escaped (EscapeControls).
func (l RequestLine) Shown() string { return string(EscapeControls([]byte(l.Text))) }

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
	return string(EscapeControls(q))
}

// ValueText is a differing field's value in a list of differences: its
// JSON text (escaped by EscapeControls), cut after maxBytes with its
// size, or "(absent)" on the side without the field.
func ValueText(v json.RawMessage, maxBytes int) string {
	if v == nil {
		return "(absent)"
	}
	s := string(EscapeControls(v))
	if len(s) > maxBytes {
		n := maxBytes
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = fmt.Sprintf("%s… (%d bytes)", s[:n], len(v))
	}
	return s
}

// EscapeControls escapes, in encoded JSON, the characters encoding/json
// and PostgreSQL's jsonb output leave raw that a terminal acts on: DEL
// and the C1 controls (U+0080 to U+009F; U+009B is a terminal's one-byte
// CSI), and the bidirectional formatting characters (U+202A to U+202E,
// U+2066 to U+2069, U+200E, U+200F, U+061C), which reorder what is shown
// around them so that a value reads as another. They can only stand
// inside strings, where \uXXXX is the same value.
func EscapeControls(b []byte) []byte {
	clean := true
	for i := 0; i < len(b); i++ {
		// The first bytes of every character escaped, in UTF-8.
		if c := b[i]; c == 0x7f || c == 0xc2 || c == 0xd8 || c == 0xe2 {
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
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) || IsBidiControl(r) {
			out = append(out, `\u`...)
			out = append(out, strconv.FormatInt(int64(r)|0x10000, 16)[1:]...)
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// IsBidiControl tells whether r is a bidirectional formatting character:
// an embedding, override or isolate, or an implicit mark.
func IsBidiControl(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return r == 0x200e || r == 0x200f || r == 0x061c
}
