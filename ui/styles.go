package ui

import (
	"github.com/charmbracelet/lipgloss"

	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// Styles are the console's looks, built from one renderer so that the
// colour profile (NO_COLOR, a monochrome terminal, the ASCII profile of the
// tests) applies everywhere. Every coloured thing also carries a glyph or a
// word, so nothing is lost without colour.
type Styles struct {
	Brand     lipgloss.Style
	Bar       lipgloss.Style
	Muted     lipgloss.Style
	Bold      lipgloss.Style
	Title     lipgloss.Style
	Header    lipgloss.Style
	Selected  lipgloss.Style
	Error     lipgloss.Style
	Banner    lipgloss.Style
	ReadOnly  lipgloss.Style
	Box       lipgloss.Style
	HelpKey   lipgloss.Style
	HelpDesc  lipgloss.Style
	HelpSep   lipgloss.Style
	Input     lipgloss.Style
	Pending   lipgloss.Style
	Stuck     lipgloss.Style
	Completed lipgloss.Style
	Rejected  lipgloss.Style
	Released  lipgloss.Style
	Conflict  lipgloss.Style
	Expiring  lipgloss.Style
}

// NewStyles builds the styles from a renderer. It uses the 16 ANSI colours
// so the terminal's theme decides the exact shades, and never asks the
// terminal for its background.
func NewStyles(r *lipgloss.Renderer) Styles {
	c := func(n string) lipgloss.Color { return lipgloss.Color(n) }
	return Styles{
		Brand:     r.NewStyle().Bold(true).Foreground(c("6")),
		Bar:       r.NewStyle(),
		Muted:     r.NewStyle().Foreground(c("8")),
		Bold:      r.NewStyle().Bold(true),
		Title:     r.NewStyle().Bold(true),
		Header:    r.NewStyle().Bold(true).Underline(true),
		Selected:  r.NewStyle().Reverse(true),
		Error:     r.NewStyle().Foreground(c("1")),
		Banner:    r.NewStyle().Bold(true).Foreground(c("15")).Background(c("1")),
		ReadOnly:  r.NewStyle().Foreground(c("3")),
		Box:       r.NewStyle().Foreground(c("8")),
		HelpKey:   r.NewStyle().Bold(true),
		HelpDesc:  r.NewStyle().Foreground(c("8")),
		HelpSep:   r.NewStyle().Foreground(c("8")),
		Input:     r.NewStyle(),
		Pending:   r.NewStyle().Foreground(c("4")),
		Stuck:     r.NewStyle().Bold(true).Foreground(c("3")),
		Completed: r.NewStyle().Foreground(c("2")),
		Rejected:  r.NewStyle().Foreground(c("1")),
		Released:  r.NewStyle().Foreground(c("8")),
		Conflict:  r.NewStyle().Bold(true).Foreground(c("5")),
		Expiring:  r.NewStyle().Foreground(c("6")),
	}
}

// state returns the style of a state.
func (s Styles) state(st readmodel.State) lipgloss.Style {
	switch st {
	case readmodel.StatePending:
		return s.Pending
	case readmodel.StateStuck:
		return s.Stuck
	case readmodel.StateDeferred:
		return s.Pending
	case readmodel.StateCompleted:
		return s.Completed
	case readmodel.StateRejected:
		return s.Rejected
	}
	return s.Released
}

// row returns the style of a row's state cell in the list.
func (s Styles) row(r readmodel.Row) lipgloss.Style {
	if r.Conflicted && r.State != readmodel.StateStuck && r.State != readmodel.StateDeferred {
		return s.Conflict
	}
	return s.state(r.State)
}
