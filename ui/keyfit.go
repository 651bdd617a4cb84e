package ui

import (
	"strings"

	"github.com/rivo/uniseg"
)

// keyFit cuts keys shown together so that what tells them apart stays:
// the part every key shares at its start (the prefix) gives way first,
// then the part they share at their end (the suffix), before a cell of
// what differs. "order-00035:charge" beside "order-00036:charge" reads
// "…0035:charge" rather than "order-…harge". The shared parts are cut
// the same way in every key, so that two keys that differ in a part shown
// whole never read alike.
type keyFit struct {
	prefix, suffix string
	// mid is the widest of the keys' middles, the part between the
	// shared prefix and suffix.
	mid int
	// distinct: there are at least two different keys (otherwise
	// nothing is shared to cut: a key is cut in its middle).
	distinct bool
}

// newKeyFit measures keys, cleaned as they are shown.
func newKeyFit(keys []string) keyFit {
	var f keyFit
	if len(keys) == 0 {
		return f
	}
	first := keys[0]
	prefix := clusters(first)
	for _, k := range keys[1:] {
		if k == first {
			continue
		}
		f.distinct = true
		prefix = prefix[:commonPrefix(prefix, clusters(k))]
	}
	if !f.distinct {
		return f
	}
	f.prefix = strings.Join(prefix, "")
	// The suffix is shared by what follows the prefix, so that the two
	// never overlap ("ab" and "abab" share "ab" and no suffix).
	var suffix []string
	for i, k := range keys {
		rest := reverse(clusters(k[len(f.prefix):]))
		if i == 0 {
			suffix = rest
			continue
		}
		suffix = suffix[:commonPrefix(suffix, rest)]
	}
	f.suffix = strings.Join(reverse(suffix), "")
	for _, k := range keys {
		f.mid = max(f.mid, width(k[len(f.prefix):len(k)-len(f.suffix)]))
	}
	return f
}

// fit cuts key to w cells: a key that fits is whole; otherwise the
// shared prefix keeps its end, down to "…", then the shared suffix its
// start, and only a middle wider than the room left is cut in its own
// middle.
func (f keyFit) fit(key string, w int) string {
	if width(key) <= w {
		return key
	}
	if !f.distinct || len(key) < len(f.prefix)+len(f.suffix) ||
		!strings.HasPrefix(key, f.prefix) || !strings.HasSuffix(key, f.suffix) {
		return truncateMiddle(key, w)
	}
	mid := key[len(f.prefix) : len(key)-len(f.suffix)]
	p, s := f.prefix, f.suffix
	room := w - f.mid // for the prefix and the suffix once the widest middle is whole
	if pw, sw := width(p), width(s); pw+sw > room {
		p = truncateStart(p, max(min(pw, 1), room-sw))
		s = truncate(s, max(min(sw, 1), room-width(p)))
	}
	out := p + mid + s
	if width(out) > w {
		// Even the middle does not fit: what is left of the rest goes too.
		out = truncateMiddle(key, w)
	}
	return out
}

// truncateStart cuts s to w cells keeping its end, with an ellipsis at the
// start, by whole grapheme clusters; a wide character that did not fit
// leaves a space before the ellipsis's text, so the width is w.
func truncateStart(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if width(s) <= w {
		return s
	}
	cs := clusters(s)
	tw, j := 0, len(cs)
	for j > 0 && tw+width(cs[j-1]) <= w-1 {
		j--
		tw += width(cs[j])
	}
	return strings.Repeat(" ", max(0, w-1-tw)) + "…" + strings.Join(cs[j:], "")
}

// clusters splits s into grapheme clusters.
func clusters(s string) []string {
	var out []string
	g := uniseg.NewGraphemes(s)
	for g.Next() {
		out = append(out, g.Str())
	}
	return out
}

func commonPrefix(a, b []string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, c := range s {
		out[len(s)-1-i] = c
	}
	return out
}
