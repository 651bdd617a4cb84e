package ui

import (
	"context"
	"errors"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
)

// Run opens the console on src in the terminal's alternate screen (mouse
// off) and returns when the operator quits or ctx ends. An unreachable
// database is shown inside the console, not returned.
func Run(ctx context.Context, src Source, opts Config) error {
	m := newModel(ctx, src, opts, nil)
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx))
	if _, err := p.Run(); err != nil {
		if ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled) {
			return nil // the caller ended the console
		}
		return fmt.Errorf("run console: %w", err)
	}
	return nil
}
