package ui

import (
	"os"
	"testing"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// memoryDSNEnv hands the seeded database to the child process of
// TestConsoleMemory (build tag consolememory).
const memoryDSNEnv = "OPSDESK_MEMORY_CHILD_DSN"

// TestMain starts a throw-away cluster (dbtest) for the tests against a
// real database; the memory test's child process connects to its
// parent's instead.
func TestMain(m *testing.M) {
	if os.Getenv(memoryDSNEnv) != "" {
		os.Exit(m.Run())
	}
	dbtest.Main(m)
}
