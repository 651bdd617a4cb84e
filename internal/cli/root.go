// Package cli holds opsdesk's commands. It is the only package that imports
// cobra; each command has an options struct and a run function that tests
// call with buffers.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/internal/termtext"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and failed
	ExitUsage   = 2 // bad flags, arguments or configuration
)

// usageError marks errors that are the caller's to fix.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// Main runs opsdesk with args and returns the exit code. It is the one
// place that maps errors to exit codes.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	// Errors quote stored text (a key, a role) and the database's words.
	fmt.Fprintln(stderr, "opsdesk:", termtext.CleanLines(err.Error()))
	var usage *usageError
	if errors.As(err, &usage) {
		return ExitUsage
	}
	return ExitFailure
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "opsdesk",
		Short: "Make retried operations safe, and fix the ones that went wrong",
		Long: "opsdesk records every mutating operation under a stable identity so that retries\n" +
			"replay instead of repeating, and helps on-call engineers reconcile the operations\n" +
			"whose outcome nobody saw.\n\n" +
			"Without a command, opsdesk opens the console on the configured context.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          exactArgs(0),
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Flag errors are usage errors (exit 2), not runtime failures.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	var g globalFlags
	addGlobalFlags(root.Flags(), &g)
	var goTo string
	root.Flags().StringVar(&goTo, "goto", "", "open the console on a : command, such as 'stuck tool:charge-card' (what alerts point at)")
	root.RunE = func(cmd *cobra.Command, _ []string) error { return runConsole(cmd, &g, goTo) }
	root.AddCommand(newVersionCmd(), newMigrateCmd(), newDemoCmd(), newOpsCmd(&g), newDoctorCmd(&g), newReconcilerCmd(&g),
		newResolveCmd(&g), newConflictsCmd(&g), newAccessCmd(&g), newAuditCmd(&g), newRetentionCmd(&g),
		newExporterCmd(&g))
	suggestSubcommands(root)
	return root
}

// suggestSubcommands makes every command group answer a word that is not
// one of its commands as cobra does when no Args is set ("unknown command
// … Did you mean …?"), as a usage error: exactArgs(0) on a group would
// say "accepts 0 arg(s)", which tells a typing mistake nothing.
func suggestSubcommands(cmd *cobra.Command) {
	if !cmd.HasSubCommands() {
		return
	}
	// cobra sets its default (2) only on its own path, which Args replaces.
	cmd.SuggestionsMinimumDistance = 2
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n  " + strings.Join(s, "\n  ")
		}
		return usagef("%s\n\nRun '%s --help' for its commands.", msg, cmd.CommandPath())
	}
	for _, c := range cmd.Commands() {
		suggestSubcommands(c)
	}
}

// exactArgs is cobra.ExactArgs as a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return &usageError{err: err}
		}
		return nil
	}
}
