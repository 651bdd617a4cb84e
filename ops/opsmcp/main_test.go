package opsmcp_test

import (
	"testing"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// TestMain shares make test's cluster, or starts one for this binary.
func TestMain(m *testing.M) { dbtest.Main(m) }
