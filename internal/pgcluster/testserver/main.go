// Command testserver runs a command (make test's go test) against one
// throw-away PostgreSQL cluster that it starts first and stops and removes
// once the command has exited, whatever its outcome:
//
//	go run ./internal/pgcluster/testserver go test -race ./...
//
// It sets OPSDESK_TEST_DSN to the cluster's superuser DSN, so that every
// package's test binary (internal/dbtest, ops/opstest) tests on it instead
// of starting a cluster of its own; each test still gets its own database,
// cloned from one migrated template (internal/dbclone), which testserver
// builds while go test compiles. Tests that need a server of their own
// (pgcluster's, the fault tests', the demo's) still start one.
//
// With OPSDESK_TEST_DSN already set, it starts nothing and runs the command
// on that server. SIGINT, SIGTERM and SIGHUP are passed on to the command;
// the cluster goes when it has exited. Killed outright, the server dies
// with testserver (pgcluster's parent-death signal) and the next cluster
// started on the machine removes its directory.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/opsdesk/opsdesk/internal/dbclone"
	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/pgcluster"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testserver COMMAND [ARG...]")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1], os.Args[2:]))
}

func run(name string, args []string) int {
	// Caught from the start, so that an interrupt while the cluster
	// starts still stops it.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)

	if strings.TrimSpace(os.Getenv(dbtest.EnvDSN)) != "" {
		return runCommand(name, args, signals, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: maxConnections()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testserver: start PostgreSQL: %v\n", err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testserver: stop PostgreSQL: %v\n", err)
		}
	}()
	dsn := cluster.DSN("postgres")
	if err := os.Setenv(dbtest.EnvDSN, dsn); err != nil {
		fmt.Fprintf(os.Stderr, "testserver: %v\n", err)
		return 1
	}
	// The template is migrated while go test compiles; a test binary that
	// is ready first waits for it (dbclone serializes template builds on
	// the server), so no package migrates its own.
	template := make(chan error, 1)
	go func() {
		_, err := dbclone.For(dsn).Template()
		template <- err
	}()
	select {
	case sig := <-signals: // while the cluster started: run nothing
		fmt.Fprintf(os.Stderr, "testserver: %v before %s started\n", sig, name)
		return 128 + int(sig.(syscall.Signal))
	default:
	}
	return runCommand(name, args, signals, template)
}

// runCommand runs the command with the environment, passing on the signals
// testserver gets, and returns its exit status. template, when not nil,
// reports the template's build: a failure is reported once here (every
// test binary fails on it too).
func runCommand(name string, args []string, signals <-chan os.Signal, template <-chan error) int {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testserver: %v\n", err)
		return 1
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	templateFailed := false
	for {
		select {
		case err := <-template:
			template = nil
			if err != nil {
				templateFailed = true
				fmt.Fprintf(os.Stderr, "testserver: prepare template database: %v\n", err)
			}
		case sig := <-signals:
			// A terminal's interrupt reached the command too; a
			// signal sent to testserver alone did not.
			_ = cmd.Process.Signal(sig)
		case err := <-exited:
			var exit *exec.ExitError
			switch {
			case err == nil && templateFailed:
				return 1
			case err == nil:
				return 0
			case errors.As(err, &exit) && exit.ExitCode() > 0:
				return exit.ExitCode()
			case errors.As(err, &exit):
				if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					fmt.Fprintf(os.Stderr, "testserver: %s: %v\n", name, err)
					return 128 + int(ws.Signal())
				}
				fallthrough
			default:
				fmt.Fprintf(os.Stderr, "testserver: %s: %v\n", name, err)
				return 1
			}
		}
	}
}

// maxConnections sizes the shared server: go test runs up to GOMAXPROCS
// test binaries at once (its -p), each of which had a cluster of 200
// connections to itself; opsdesk has 16 packages with tests.
func maxConnections() int {
	binaries := min(max(runtime.GOMAXPROCS(0), 2), 16)
	return 100 + 200*binaries
}
