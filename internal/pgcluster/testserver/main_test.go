package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// The command gets the cluster's DSN, testserver exits with the command's
// status, and the cluster's directory is gone once it has.
func TestRunsTheCommandOnAClusterItRemoves(t *testing.T) {
	t.Setenv(dbtest.EnvDSN, "")
	out := filepath.Join(t.TempDir(), "dsn")
	code := run("sh", []string{"-c", `printf %s "$` + dbtest.EnvDSN + `" > "$1"; exit 3`, "sh", out})
	if code != 3 {
		t.Fatalf("exit status %d, want the command's 3", code)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(string(b))
	if err != nil {
		t.Fatalf("the command's %s %q: %v", dbtest.EnvDSN, b, err)
	}
	if !strings.HasPrefix(cfg.Host, "/") {
		t.Fatalf("host %q: want the cluster's socket directory", cfg.Host)
	}
	if _, err := os.Stat(cfg.Host); !os.IsNotExist(err) {
		t.Fatalf("the cluster's directory %s is left behind: %v", cfg.Host, err)
	}
}

// With OPSDESK_TEST_DSN set, the command runs on that server and nothing
// is started.
func TestHonoursAGivenServer(t *testing.T) {
	t.Setenv(dbtest.EnvDSN, "host=/nowhere dbname=given")
	out := filepath.Join(t.TempDir(), "dsn")
	if code := run("sh", []string{"-c", `printf %s "$` + dbtest.EnvDSN + `" > "$1"`, "sh", out}); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if b, _ := os.ReadFile(out); string(b) != "host=/nowhere dbname=given" {
		t.Fatalf("the command got %q", b)
	}
}

// A command killed by a signal exits 128+signal, as a shell reports it.
func TestCommandKilledBySignal(t *testing.T) {
	t.Setenv(dbtest.EnvDSN, "host=/nowhere")
	if code := run("sh", []string{"-c", "kill -TERM $$"}); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit status %d, want %d", code, 128+int(syscall.SIGTERM))
	}
}
