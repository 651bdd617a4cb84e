package ui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rivo/uniseg"

	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// revealBytes is how much of a revealed value the console asks for: the
// database cuts the rest, so that a value of any size (the library stores
// up to its MaxResultBytes, and older records more) costs no more than
// this to fetch and to lay out, and the screen stays responsive.
const revealBytes = 64 << 10

// revealedValue is a revealed value as the flow's last step shows it: laid out
// once, when it arrives or the width changes (never in View), and
// scrolled through.
type revealedValue struct {
	v     reconcile.Revealed
	ok    bool // a value arrived
	width int  // the width the lines were laid out for
	// sealed is what became of a value sealed at rest (kid is its key
	// id), and plain its plaintext when it was opened.
	sealed sealedAs
	kid    string
	plain  []byte
	scrollText
}

// sealedAs is what the console could do with a value sealed at rest.
type sealedAs int

const (
	notSealed          sealedAs = iota
	sealedNoKeys                // the context has no reveal_keys
	sealedNoKey                 // its reveal_keys hold no key of that id
	sealedTooLong               // cut by revealBytes: not the whole envelope
	sealedNotAuthentic          // the key is held, and opening it failed
	sealedOpened                // decrypted here, with the context's key
)

// set keeps a value that arrived, decrypting it when it is sealed under a
// key id keys hold (keys may be nil: the console then holds no key); lay
// it out before showing it. id is the record's identity, which the value
// is bound to.
func (r *revealedValue) set(v reconcile.Revealed, keys opsmodel.Keyring, field reconcile.Field, id opsmodel.Identity) {
	*r = revealedValue{v: v, ok: true}
	kid, ok := opsmodel.EncryptedKeyID(v.Text)
	if !ok {
		return
	}
	r.kid = kid
	switch {
	case keys == nil:
		r.sealed = sealedNoKeys
	case keyMissing(keys, kid):
		r.sealed = sealedNoKey
	case v.Truncated():
		r.sealed = sealedTooLong
	default:
		plain, _, err := opsmodel.OpenStored(keys, string(field), id, v.Text)
		if err != nil {
			r.sealed = sealedNotAuthentic
			return
		}
		r.sealed, r.plain = sealedOpened, plain
	}
}

// keyMissing tells whether keys hold no key named kid.
func keyMissing(keys opsmodel.Keyring, kid string) bool {
	_, err := keys.Key(kid)
	return err != nil
}

// forget drops the value: it is hidden again when the operator leaves.
func (r *revealedValue) forget() { *r = revealedValue{} }

// layOut renders the value's lines for width w, unless they already are.
// more says how to see what was cut.
func (r *revealedValue) layOut(w int, st Styles, more string) {
	if !r.ok || w == r.width {
		return
	}
	r.width, r.offset = w, 0
	r.lines = r.lines[:0]
	text := r.v.Text
	if len(text) == 0 || string(text) == "null" {
		r.lines = append(r.lines, " "+st.Muted.Render("null: nothing was stored with the outcome"))
		return
	}
	if note := r.sealedNote(); note != "" {
		for _, l := range wrap(note, max(1, w-2)) {
			r.lines = append(r.lines, " "+st.Muted.Render(l))
		}
		r.lines = append(r.lines, "")
	}
	if r.sealed == sealedOpened {
		text = r.plain
	}
	for l := range strings.SplitSeq(indentJSON(text), "\n") {
		indent := len(l) - len(strings.TrimLeft(l, " "))
		for _, wl := range hardWrap(termtext.Clean(l[indent:]), max(1, w-4-indent)) {
			r.lines = append(r.lines, "   "+strings.Repeat(" ", indent)+wl)
		}
	}
	if r.v.Truncated() {
		cut := r.v.Size - int64(len(text))
		r.lines = append(r.lines, "")
		for _, l := range wrap(fmt.Sprintf("… %s more bytes not shown: the console shows the first %d KiB of %s bytes. %s",
			groupDigits(cut), revealBytes>>10, groupDigits(r.v.Size), more), max(1, w-2)) {
			r.lines = append(r.lines, " "+st.Muted.Render(l))
		}
	}
}

// sealedNote says what became of a value sealed at rest; "" for a plain
// one.
func (r *revealedValue) sealedNote() string {
	kid := strconv.Quote(termtext.Clean(r.kid))
	const asStored = " The envelope is shown as stored."
	switch r.sealed {
	case sealedNoKeys:
		// The service's keyring has the keys; this context has none.
		return "encrypted under key id " + kid + ": the service sealed this value at rest (Config.Keyring), " +
			"and the console holds no key to decrypt it." + asStored
	case sealedNoKey:
		return "encrypted under key id " + kid + ": the service sealed this value at rest (Config.Keyring), " +
			"and this context's reveal_keys hold no key " + kid + "." + asStored
	case sealedTooLong:
		return "encrypted under key id " + kid + ": the value is longer than the console fetches, so it is not decrypted here; " +
			"opsdesk ops reveal decrypts it whole." + asStored
	case sealedNotAuthentic:
		return "encrypted under key id " + kid + ", and it does not authenticate with this context's key " + kid +
			": it was altered or moved from another record, or the key is not the one it was sealed under. Nothing was decrypted." + asStored
	case sealedOpened:
		return "decrypted locally under key id " + kid + " with this context's reveal_keys: the store keeps it encrypted."
	}
	return ""
}

// indentJSON lays JSON text out one member or element per line, indented
// by two spaces a level, as json.Indent does, but it takes the start of a
// value too (a value cut by revealBytes is not valid JSON) and anything
// else as it is. Whitespace outside strings is the layout's.
func indentJSON(text []byte) string {
	var b strings.Builder
	b.Grow(len(text) + len(text)/4)
	depth := 0
	newline := func() {
		b.WriteByte('\n')
		for range depth {
			b.WriteString("  ")
		}
	}
	// next is the first byte after i that is not whitespace, or 0.
	next := func(i int) byte {
		for j := i + 1; j < len(text); j++ {
			if c := text[j]; c != ' ' && c != '\n' && c != '\r' && c != '\t' {
				return c
			}
		}
		return 0
	}
	inString := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if inString {
			b.WriteByte(c)
			switch c {
			case '\\':
				if i+1 < len(text) {
					i++
					b.WriteByte(text[i])
				}
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\n', '\r', '\t':
		case '"':
			inString = true
			b.WriteByte(c)
		case '{', '[':
			b.WriteByte(c)
			if n := next(i); n == '}' || n == ']' {
				continue // empty: {} or []
			}
			depth++
			newline()
		case '}', ']':
			if i > 0 && text[prevNonSpace(text, i)] != '{' && text[prevNonSpace(text, i)] != '[' {
				depth = max(0, depth-1)
				newline()
			}
			b.WriteByte(c)
		case ',':
			b.WriteByte(c)
			newline()
		case ':':
			b.WriteString(": ")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// prevNonSpace is the index of the last byte before i that is not
// whitespace, or i when there is none.
func prevNonSpace(text []byte, i int) int {
	for j := i - 1; j >= 0; j-- {
		if c := text[j]; c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return j
		}
	}
	return i
}

// hardWrap cuts s into lines of at most w cells, between grapheme
// clusters, keeping every character (wrap joins words and drops repeated
// spaces, which would show a stored value other than it is). It takes
// one pass, however long s is.
func hardWrap(s string, w int) []string {
	if w <= 0 {
		return nil
	}
	if isASCII(s) {
		var lines []string
		for len(s) > w {
			lines = append(lines, s[:w])
			s = s[w:]
		}
		return append(lines, s)
	}
	var lines []string
	start, at, cells := 0, 0, 0
	state := -1
	for rest := s; rest != ""; {
		var cluster string
		var cw int
		cluster, rest, cw, state = uniseg.FirstGraphemeClusterInString(rest, state)
		if cells+cw > w && at > start {
			lines = append(lines, s[start:at])
			start, cells = at, 0
		}
		at += len(cluster)
		cells += cw
	}
	return append(lines, s[start:])
}

// groupDigits writes n with thousands separators: 33,554,432.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
