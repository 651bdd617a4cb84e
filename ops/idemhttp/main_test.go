package idemhttp_test

import (
	"testing"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
