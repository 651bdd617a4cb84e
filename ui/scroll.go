package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// scrollText is a record's page of text that scrolls when it is longer
// than the screen: an operation's detail, an audit record.
type scrollText struct {
	offset int
	lines  []string
}

// room is how many lines of text fit in h: the last line tells the
// position when the text is longer.
func (t *scrollText) room(h int) int {
	if len(t.lines) > h {
		return max(1, h-1)
	}
	return h
}

// clampScroll keeps the offset within the text.
func (t *scrollText) clampScroll(h int) {
	t.offset = min(max(0, t.offset), max(0, len(t.lines)-t.room(h)))
}

// enableScroll enables the scrolling keys when the text is longer than h.
func (t *scrollText) enableScroll(k *KeyMap, h int) {
	scroll := len(t.lines) > h
	for _, b := range []*key.Binding{&k.Up, &k.Down, &k.Top, &k.Bottom, &k.NextPage, &k.PrevPage} {
		b.SetEnabled(scroll)
	}
	k.NextPage.SetHelp("pgdn", "page down")
	k.PrevPage.SetHelp("pgup", "page up")
}

// scrollKey scrolls by a line, a page or to either end, and reports
// whether msg was a scrolling key.
func (t *scrollText) scrollKey(msg tea.KeyMsg, k KeyMap, h int) bool {
	switch {
	case key.Matches(msg, k.Up):
		t.offset--
	case key.Matches(msg, k.Down):
		t.offset++
	case key.Matches(msg, k.PrevPage):
		t.offset -= max(1, h-1)
	case key.Matches(msg, k.NextPage):
		t.offset += max(1, h-1)
	case key.Matches(msg, k.Top):
		t.offset = 0
	case key.Matches(msg, k.Bottom):
		t.offset = len(t.lines)
	default:
		return false
	}
	t.clampScroll(h)
	return true
}

// scrollView is the text as it fits in w×h, and the position when it is
// longer.
func (t *scrollText) scrollView(w, h int, st Styles) string {
	if h <= 0 {
		return ""
	}
	if len(t.lines) <= h {
		return strings.Join(t.lines, "\n")
	}
	room := t.room(h)
	off := min(t.offset, max(0, len(t.lines)-room))
	end := min(len(t.lines), off+room)
	more := fmt.Sprintf(" lines %d–%d of %d · ↑/↓ scroll", off+1, end, len(t.lines))
	return strings.Join(t.lines[off:end], "\n") + "\n" + st.Muted.Render(truncate(more, w))
}
