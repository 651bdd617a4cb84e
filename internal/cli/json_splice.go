package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"

	"github.com/opsdesk/opsdesk/internal/termtext"
)

// splicer writes JSON output that holds stored JSON values of any size
// (a revealed request, say) without encoding or copying them whole:
// encoding/json would compact each into its buffer, indent all of it into
// another and termtext.EscapeControls a third copy, so that a 32 MiB request cost
// hundreds of megabytes. The values are held out of the encoding (hold)
// behind placeholders, and written in their place as the database stored
// them, a slice at a time through termtext.EscapeControls (write). The output is
// the same JSON value; only the held values are not re-indented.
type splicer struct {
	nonce string
	held  []json.RawMessage
}

// spliceSlice is how much of a held value is escaped and written at once.
const spliceSlice = 64 << 10

// hold returns the placeholder to encode instead of raw (nil stays nil:
// JSON null), which write replaces with raw.
func (s *splicer) hold(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	if s.nonce == "" {
		// A placeholder is a JSON string of random bytes: no stored text
		// encoded around it can be one.
		b := make([]byte, 16)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		s.nonce = "opsdesk-splice-" + hex.EncodeToString(b)
	}
	s.held = append(s.held, raw)
	return json.RawMessage(fmt.Sprintf(`"%s-%d"`, s.nonce, len(s.held)-1))
}

// write encodes v as writeJSON does, each placeholder in it replaced by
// the value held for it.
func (s *splicer) write(w io.Writer, v any) error {
	var env bytes.Buffer
	if err := writeJSON(&env, v); err != nil {
		return err
	}
	type at struct{ start, end, held int }
	var spots []at
	for i := range s.held {
		p := []byte(fmt.Sprintf(`"%s-%d"`, s.nonce, i))
		start := bytes.Index(env.Bytes(), p)
		if start < 0 {
			return fmt.Errorf("encode JSON: value %d was not placed", i)
		}
		spots = append(spots, at{start, start + len(p), i})
	}
	slices.SortFunc(spots, func(a, b at) int { return a.start - b.start })
	out := env.Bytes()
	pos := 0
	for _, sp := range spots {
		if _, err := w.Write(out[pos:sp.start]); err != nil {
			return err
		}
		if err := writeEscaped(w, s.held[sp.held]); err != nil {
			return err
		}
		pos = sp.end
	}
	_, err := w.Write(out[pos:])
	return err
}

// writeEscaped writes JSON text through termtext.EscapeControls a slice at a time,
// each slice ending on a character boundary.
func writeEscaped(w io.Writer, text []byte) error {
	for len(text) > 0 {
		n := min(len(text), spliceSlice)
		for n < len(text) && n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		if n == 0 { // not UTF-8: no boundary to find
			n = min(len(text), spliceSlice)
		}
		if _, err := w.Write(termtext.EscapeControls(text[:n])); err != nil {
			return err
		}
		text = text[n:]
	}
	return nil
}

// escapingWriter writes JSON text to w through termtext.EscapeControls; each write
// must end on a character boundary (desk.RevealTo's slices do).
type escapingWriter struct{ w io.Writer }

func (e escapingWriter) Write(p []byte) (int, error) {
	if _, err := e.w.Write(termtext.EscapeControls(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
