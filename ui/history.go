package ui

import (
	"slices"

	tea "github.com/charmbracelet/bubbletea"
)

// place is where the operator was: the screens on the stack and, for each
// that remembers, what it showed (its filter, page and cursor), so that
// going back shows it again as it was. Flows are never a place: going
// back never re-enters a decision.
type place struct {
	stack []screen
	marks []any // marks[i] is stack[i]'s mark, nil for a screen without
	// landed is how many screens the stack had once the operator left
	// this place: esc returns here from that screen (or one below it),
	// and goes down the stack from the screens drilled into since.
	landed int
}

// marker is a screen that can be returned to as it was: the screens are
// one of each kind, so a list left for another filter shows the old one
// again from its mark.
type marker interface {
	// mark is what the screen shows now.
	mark() any
	// restore shows what mark names again and asks for it afresh.
	restore(mark any) tea.Cmd
}

// historyMax bounds the history: the oldest places are forgotten first.
const historyMax = 32

// history is the places the operator jumped away from (a : command, a
// --goto, a screen opened off the stack), newest last. esc returns to the
// newest; - swaps it with where the operator is.
type history struct{ places []place }

// push remembers p, forgetting the oldest place beyond historyMax.
func (h *history) push(p place) {
	h.places = append(h.places, p)
	if n := len(h.places) - historyMax; n > 0 {
		h.places = slices.Delete(h.places, 0, n)
	}
}

// top is the newest place.
func (h *history) top() (place, bool) {
	if len(h.places) == 0 {
		return place{}, false
	}
	return h.places[len(h.places)-1], true
}

// pop takes the newest place.
func (h *history) pop() (place, bool) {
	if len(h.places) == 0 {
		return place{}, false
	}
	p := h.places[len(h.places)-1]
	h.places = h.places[:len(h.places)-1]
	return p, true
}

func (h *history) empty() bool { return len(h.places) == 0 }

// placeOf is the place stack shows: without the flows on top of it, each
// screen's mark taken now.
func placeOf(stack []screen) place {
	end := len(stack)
	for end > 1 {
		if _, ok := stack[end-1].(flow); !ok {
			break
		}
		end--
	}
	p := place{stack: slices.Clone(stack[:end]), marks: make([]any, end)}
	for i, s := range p.stack {
		if m, ok := s.(marker); ok {
			p.marks[i] = m.mark()
		}
	}
	return p
}

// same tells whether p and q are one place: the same screens showing the
// same things.
func (p place) same(q place) bool {
	if !slices.Equal(p.stack, q.stack) || len(p.marks) != len(q.marks) {
		return false
	}
	for i := range p.marks {
		if !sameMark(p.marks[i], q.marks[i]) {
			return false
		}
	}
	return true
}

// sameMark compares two marks by what they name.
func sameMark(a, b any) bool {
	type keyed interface{ markKey() string }
	ka, okA := a.(keyed)
	kb, okB := b.(keyed)
	if okA && okB {
		return ka.markKey() == kb.markKey()
	}
	return a == nil && b == nil
}

// extends tells whether stack is the stack of p with screens drilled into
// on top (or p's own): opening it goes forward, not elsewhere.
func (p place) extends(stack []screen) bool {
	return len(stack) >= len(p.stack) && slices.Equal(stack[:len(p.stack)], p.stack)
}

// unlessFlow is p, or nil when a flow is on its stack (under a screen
// drilled into from it, a bulk plan's group say): - never goes back
// into a decision.
func (p place) unlessFlow() *place {
	for _, s := range p.stack {
		if _, ok := s.(flow); ok {
			return nil
		}
	}
	return &p
}
