package ui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// sideBySideWidth is the narrowest terminal that shows the two requests
// side by side; below it they are stacked, the original first.
const sideBySideWidth = 100

// Bounds of what a revealed conflict lays out, so that requests of any
// size (the library stores intents up to its MaxIntentBytes, which a
// service may raise) cost no more than this to lay out and page, as a
// revealed value's revealBytes does: a line's text is cut after
// revealBytes, and a side after conflictSideLines lines.
const conflictSideLines = 20_000

// conflictValueBytes bounds a value in the list of differences.
const conflictValueBytes = 60

// conflictShown is a revealed conflict as the flow's last step shows it:
// laid out once, when it arrives or the width changes (never in View),
// and scrolled through.
type conflictShown struct {
	rev reconcile.ConflictReveal
	// original and attempted are the requests one field a line
	// (sideCells), as the reveal's command laid them out.
	original, attempted []sideCell
	ok                  bool // a reveal arrived
	width               int  // the width the lines were laid out for
	scrollText
}

// set keeps a reveal that arrived; lay it out before showing it.
func (c *conflictShown) set(rev reconcile.ConflictReveal, original, attempted []sideCell) {
	*c = conflictShown{rev: rev, original: original, attempted: attempted, ok: true}
}

// forget drops the requests: they are hidden again when the operator
// leaves.
func (c *conflictShown) forget() { *c = conflictShown{} }

// layOut renders the differences and the two requests for width w,
// under their titles, unless they already are.
func (c *conflictShown) layOut(w int, st Styles, original, attempted string) {
	if !c.ok || w == c.width || w <= 0 {
		return
	}
	c.width, c.offset = w, 0
	c.lines = c.lines[:0]
	c.lines = append(c.lines, diffList(c.rev, w, st)...)
	c.lines = append(c.lines, "")
	if w >= sideBySideWidth {
		c.lines = append(c.lines, besideLines(c.original, c.attempted, original, attempted, w, st)...)
		return
	}
	c.lines = append(c.lines, stackedLines(c.original, original, w, st)...)
	c.lines = append(c.lines, "")
	c.lines = append(c.lines, stackedLines(c.attempted, attempted, w, st)...)
}

// diffKindText is a kind of difference as the list words it: its mark
// and its name, so that it is never told by colour alone.
func diffKindText(k reconcile.DiffKind) string {
	return reconcile.DiffMark(k) + " " + string(k)
}

// diffStyle is how the lines of a difference stand out, beside their
// mark.
func diffStyle(st Styles, k reconcile.DiffKind) func(...string) string {
	switch k {
	case reconcile.DiffChanged:
		return st.Stuck.Render
	case reconcile.DiffRemoved:
		return st.Rejected.Render
	case reconcile.DiffAdded:
		return st.Completed.Render
	}
	return st.Bar.Render // unstyled
}

// diffList lists the fields that differ, by JSON Pointer (RFC 6901), or
// says why there is no list.
func diffList(rev reconcile.ConflictReveal, w int, st Styles) []string {
	var out []string
	para := func(text string, render func(...string) string) {
		out = append(out, indented(text, max(1, w-2), " ", render)...)
	}
	switch {
	case rev.DiffError != "":
		para("✗ "+termtext.Clean(rev.DiffError), st.Error.Render)
		return out
	case len(rev.Diffs) == 0:
		para("No field differs: the requests differ only in how they are written.", st.Bold.Render)
		return out
	}
	para(fmt.Sprintf("%d differing field%s (JSON Pointer paths, RFC 6901: ~1 is a / in a key, ~0 a ~)", len(rev.Diffs), plural(len(rev.Diffs))), st.Title.Render)
	pathW := 0
	for _, d := range rev.Diffs {
		pathW = max(pathW, min(40, width(termtext.Clean(reconcile.PointerText(d.Path)))))
	}
	const kindW = 9 // "~ changed"
	for _, d := range rev.Diffs {
		p := termtext.Clean(reconcile.PointerText(d.Path))
		values := termtext.Clean(reconcile.ValueText(d.Original, conflictValueBytes)) + " → " + termtext.Clean(reconcile.ValueText(d.Attempted, conflictValueBytes))
		line := "   " + diffStyle(st, d.Kind)(pad(diffKindText(d.Kind), kindW)) + "  "
		if 5+kindW+pathW+2+20 <= w {
			line += pad(p, pathW) + "  " + truncate(values, w-5-kindW-pathW-2)
			out = append(out, line)
			continue
		}
		// Narrow: the path on its own line, the values under it.
		out = append(out, line+truncate(p, max(1, w-5-kindW)), "     "+truncate(values, max(1, w-5)))
	}
	return out
}

// sideCell is one line of a request as laid out: its mark, indentation
// and text, cleaned.
type sideCell struct {
	mark   reconcile.DiffKind
	indent string
	text   string
	note   bool // words about the request, wrapped as words
}

// sideCells lays a request out one field a line (reconcile.RequestLines),
// or says why it cannot be: not recorded, not the request fingerprinted,
// not JSON. A line's text is cut after revealBytes, a side after
// conflictSideLines lines; more says how to see them whole.
func sideCells(side reconcile.ConflictSide, diffs []reconcile.Diff, st Styles, more string) []sideCell {
	note := func(text string) sideCell { return sideCell{text: text, note: true} }
	if side.Request == nil {
		return []sideCell{note(st.Bold.Render("not recorded") + ": " + termtext.Clean(strings.TrimPrefix(side.NotRecorded, "not recorded: ")))}
	}
	var out []sideCell
	if kid, ok := opsmodel.EncryptedKeyID(side.Request); ok {
		// Sealed by the service, and not opened here: the database
		// cannot check its fingerprint, nor the console compare it.
		why := side.Sealed
		if why == "" {
			why = "the console holds no key to decrypt it"
		}
		return append(out, note(st.Bold.Render("encrypted under key id "+strconv.Quote(termtext.Clean(kid)))+
			": the service sealed this request at rest (Config.Keyring), and "+termtext.Clean(why)+"; it is not compared"),
			note(termtext.Clean(Cut(string(side.Request), revealBytes, more))))
	}
	if side.Decrypted {
		out = append(out, note(st.Muted.Render("decrypted here under key id "+strconv.Quote(termtext.Clean(side.KeyID))+
			" with this context's reveal_keys: the store keeps it encrypted")))
	} else if !side.Fingerprinted {
		out = append(out, note(st.Error.Render("⚠ this request does not hash to the fingerprint recorded for it: "+
			"it is not the request that was compared (written by hand or by another program)")))
	}
	lines, err := reconcile.RequestLines(side.Request, diffs)
	if err != nil {
		text := string(termtext.EscapeControls(side.Request))
		return append(out, note(st.Error.Render("✗ cannot lay it out: "+termtext.Clean(err.Error()))), note(termtext.Clean(Cut(text, revealBytes, more))))
	}
	for i, l := range lines {
		if i == conflictSideLines {
			out = append(out, note(st.Muted.Render(fmt.Sprintf("… %d more lines not shown. %s", len(lines)-i, more))))
			break
		}
		out = append(out, sideCell{mark: l.Mark, indent: l.Indent(), text: termtext.Clean(Cut(l.Shown(), revealBytes, more))})
	}
	return out
}

// rows lays a cell out in lines of at most w cells: the mark, the
// indentation, then the text wrapped under itself, every character kept.
func (c sideCell) rows(w int, st Styles) []string {
	if c.note {
		return wrap(c.text, max(1, w))
	}
	head := reconcile.DiffMark(c.mark) + " " + c.indent
	if width(head) > w/2 {
		head = reconcile.DiffMark(c.mark) + " " + strings.Repeat(" ", max(0, w/2-2))
	}
	style := diffStyle(st, c.mark)
	var out []string
	for i, l := range hardWrap(c.text, max(1, w-width(head))) {
		lead := head
		if i > 0 {
			lead = reconcile.DiffMark(c.mark) + strings.Repeat(" ", width(head)-1)
		}
		out = append(out, style(lead+l))
	}
	return out
}

// besideLines puts the two requests side by side, original on the left,
// a field's lines across from the same field's: a field only one side has,
// and what is said about one side (not recorded, say), faces a blank.
func besideLines(left, right []sideCell, leftTitle, rightTitle string, w int, st Styles) []string {
	colW := (w - 4) / 2
	out := []string{" " + st.Title.Render(pad(leftTitle, colW)) + " │ " + st.Title.Render(truncate(rightTitle, colW))}
	row := func(l, r sideCell) {
		lr, rr := l.rows(colW, st), r.rows(colW, st)
		if l == (sideCell{}) {
			lr = nil
		}
		if r == (sideCell{}) {
			rr = nil
		}
		for i := range max(len(lr), len(rr)) {
			a, b := "", ""
			if i < len(lr) {
				a = lr[i]
			}
			if i < len(rr) {
				b = rr[i]
			}
			out = append(out, strings.TrimRight(" "+a+strings.Repeat(" ", max(0, colW-width(a)))+" │ "+b, " "))
		}
	}
	i, j := 0, 0
	for i < len(left) || j < len(right) {
		switch {
		case i == len(left):
			row(sideCell{}, right[j])
			j++
		case j == len(right):
			row(left[i], sideCell{})
			i++
		case left[i].mark == reconcile.DiffRemoved || left[i].note:
			row(left[i], sideCell{})
			i++
		case right[j].mark == reconcile.DiffAdded || right[j].note:
			row(sideCell{}, right[j])
			j++
		case left[i].mark == reconcile.DiffChanged && right[j].mark == reconcile.DiffChanged:
			// A changed field may take more lines on one side (an
			// object become a number): its lines face each other, the
			// shorter run padded.
			i2, j2 := runEnd(left, i), runEnd(right, j)
			for k := range max(i2-i, j2-j) {
				var l, r sideCell
				if i+k < i2 {
					l = left[i+k]
				}
				if j+k < j2 {
					r = right[j+k]
				}
				row(l, r)
			}
			i, j = i2, j2
		default:
			row(left[i], right[j])
			i++
			j++
		}
	}
	return out
}

// runEnd is the end of the run of changed lines that starts at i.
func runEnd(cells []sideCell, i int) int {
	for i < len(cells) && cells[i].mark == reconcile.DiffChanged {
		i++
	}
	return i
}

// stackedLines is one request under its title, for a narrow terminal.
func stackedLines(cells []sideCell, title string, w int, st Styles) []string {
	out := []string{" " + st.Title.Render(truncate(title, max(1, w-2)))}
	for _, c := range cells {
		for _, l := range c.rows(max(1, w-3), st) {
			out = append(out, "   "+l)
		}
	}
	return out
}
