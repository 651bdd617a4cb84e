// Package termtext makes text that services and people wrote safe to
// print on a terminal, for the console and the commands alike: Clean for
// a line of text, CleanLines for a message of several, and EscapeControls
// for encoded JSON, which must stay exact. A control character, an escape
// sequence or a bidirectional formatting character in a key, an owner or
// a request would otherwise act on the operator's terminal, or make one
// value read as another.
package termtext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clean makes stored text safe to print: control characters (escape
// sequences included) would otherwise reach the terminal. A run of
// whitespace controls (a line break, a tab) reads as one space, as in
// pgconn's multi-line connection errors; any other control character, a
// bidirectional formatting character (U+202E would show what follows it
// reversed) and invalid UTF-8 show as U+FFFD.
func Clean(s string) string {
	ok := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false // the last rune written was a whitespace control's space
	for _, r := range s {
		switch {
		case isSpaceControl(r):
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		case unicode.IsControl(r), IsBidiControl(r):
			r = '\uFFFD'
		}
		b.WriteRune(r)
		space = false
	}
	return b.String()
}

// isSpaceControl tells whether r is a control character that only moves
// the cursor across or down: a tab, a line break, a form feed.
func isSpaceControl(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// CleanLines is Clean on each line of s, keeping the line breaks: a
// message of several lines (an error) stays several lines.
func CleanLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Clean(l)
	}
	return strings.Join(lines, "\n")
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
