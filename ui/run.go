package ui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Run opens the console on src in the terminal's alternate screen (mouse
// off) and returns when the operator quits or ctx ends; what a flow left
// half-done (a bulk run's decisions and batch) is then written to
// Config.Report. An unreachable
// database is shown inside the console, not returned.
func Run(ctx context.Context, src Source, opts Config) error {
	m := newModel(ctx, src, opts, nil)
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx))
	_, err := p.Run()
	// The terminal is restored: say what a flow left half-done, once the
	// decisions in flight answered (or a request's timeout passed).
	if r := m.exitReport(m.opts.Timeout + time.Second); r != "" {
		out := opts.Report
		if out == nil {
			out = os.Stderr
		}
		fmt.Fprintln(out, r)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled) {
			return nil // the caller ended the console
		}
		return fmt.Errorf("run console: %w", err)
	}
	return nil
}
