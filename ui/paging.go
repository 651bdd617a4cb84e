package ui

import (
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
)

// pageStack is keyset paging through a list that is read a page at a time:
// the operations list and the audit trail.
type pageStack[C any] struct {
	// pages holds the cursor each visited page starts after (nil: the
	// first); the last one is the current page.
	pages []*C
	// firsts holds the number (from 0) of each visited page's first row.
	firsts []int
	// turning holds the stack as it was before a page turn whose page has
	// not arrived yet, nil when none is in flight. Until it arrives the
	// page shown is not the one the stack ends with, so n and p are
	// disabled: a second n would push the shown page's Next again and
	// number one page twice. A turn that fails puts the stack back.
	turning       []*C
	turningFirsts []int
}

// firstPage goes back to the first page.
func (p *pageStack[C]) firstPage() { p.pages, p.firsts, p.turning = []*C{nil}, []int{0}, nil }

// firstRow is the number (from 0) of the current page's first row.
func (p *pageStack[C]) firstRow() int { return p.firsts[len(p.firsts)-1] }

// pageAfter is the cursor the current page starts after.
func (p *pageStack[C]) pageAfter() *C { return p.pages[len(p.pages)-1] }

// canTurn tells whether n (to the page after next, when the shown page
// has one) and p may turn a page.
func (p *pageStack[C]) canTurn(next *C) (forward, backward bool) {
	return p.turning == nil && next != nil, p.turning == nil && len(p.pages) > 1
}

// turnForward and turnBack start a turn; the screen fetches the page.
// shown is how many rows the page turned from shows.
func (p *pageStack[C]) turnForward(next *C, shown int) {
	p.turning, p.turningFirsts = p.pages, p.firsts
	p.pages = append(slices.Clip(p.pages), next)
	p.firsts = append(slices.Clip(p.firsts), p.firstRow()+shown)
}

func (p *pageStack[C]) turnBack() {
	p.turning, p.turningFirsts = p.pages, p.firsts
	p.pages, p.firsts = p.pages[:len(p.pages)-1], p.firsts[:len(p.firsts)-1]
}

// settle ends a turn when its page arrived (ok) or did not: the shown page
// is then still the one before the turn, and so is its number.
func (p *pageStack[C]) settle(ok bool) {
	if !ok && p.turning != nil {
		p.pages, p.firsts = p.turning, p.turningFirsts
	}
	p.turning, p.turningFirsts = nil, nil
}

// pageKey handles the keys every paged list shares: moving its selection
// sel among the n rows shown, and turning a page (n to next, p back). It
// reports whether msg was one of them, and whether a page turned, which
// the screen then fetches.
func (p *pageStack[C]) pageKey(msg tea.KeyMsg, k KeyMap, sel *int, n int, next *C) (handled, turned bool) {
	switch {
	case key.Matches(msg, k.Up):
		*sel--
	case key.Matches(msg, k.Down):
		*sel++
	case key.Matches(msg, k.Top):
		*sel = 0
	case key.Matches(msg, k.Bottom):
		*sel = n - 1
	case key.Matches(msg, k.NextPage):
		p.turnForward(next, n)
		return true, true
	case key.Matches(msg, k.PrevPage):
		p.turnBack()
		return true, true
	default:
		return false, false
	}
	*sel = min(max(0, *sel), max(0, n-1))
	return true, false
}

// enableKeys enables a paged list's shared keys: moving and opening when
// it shows rows, n and p when a page can turn.
func (p *pageStack[C]) enableKeys(k *KeyMap, rows bool, next *C) {
	for _, b := range []*key.Binding{&k.Up, &k.Down, &k.Top, &k.Bottom, &k.Open} {
		b.SetEnabled(rows)
	}
	forward, backward := p.canTurn(next)
	k.NextPage.SetEnabled(forward)
	k.PrevPage.SetEnabled(backward)
	k.NextPage.SetHelp("n", "next page")
	k.PrevPage.SetHelp("p", "prev page")
}

// filterBar is a list's "/" line: the filter's text to edit, and the error
// of a filter that did not parse (the list keeps its previous filter).
type filterBar struct {
	editing  bool
	input    textinput.Model
	inputErr error
}

// newFilterBar is a filter bar with an example as its placeholder.
func newFilterBar(st Styles, example string) filterBar {
	in := textInput(st, example, 500)
	in.Prompt = "/ "
	return filterBar{input: in}
}

// openBar starts editing the current filter's text, with a trailing space
// so that a term typed at once adds to it.
func (b *filterBar) openBar(current string) tea.Cmd {
	b.editing, b.inputErr = true, nil
	if current != "" {
		current += " "
	}
	b.input.SetValue(current)
	b.input.CursorEnd()
	return b.input.Focus()
}

// closeBar stops editing.
func (b *filterBar) closeBar() {
	b.editing, b.inputErr = false, nil
	b.input.Blur()
}

// editKey handles a key while editing: enter hands back the text to parse
// (accepted), esc closes the bar, any other key edits.
func (b *filterBar) editKey(msg tea.KeyMsg, k KeyMap) (text string, accepted bool, cmd tea.Cmd) {
	switch {
	case key.Matches(msg, k.Accept):
		return strings.TrimSpace(b.input.Value()), true, nil
	case key.Matches(msg, k.Cancel):
		b.closeBar()
		return "", false, nil
	}
	b.input, cmd = b.input.Update(msg)
	return "", false, cmd
}
