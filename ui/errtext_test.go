package ui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// sqlStateErr stands for the driver's error as the console sees it: an
// error with a SQLSTATE (ui does not import the driver).
type sqlStateErr struct{ msg, code string }

func (e sqlStateErr) Error() string    { return "ERROR: " + e.msg + " (SQLSTATE " + e.code + ")" }
func (e sqlStateErr) SQLState() string { return e.code }

func TestPlainError(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for err, want := range map[error]string{
		fmt.Errorf("list operations: %w", context.Canceled):                                             "the request was given up (a newer one replaced it, or you left)",
		fmt.Errorf("begin read: %w", context.DeadlineExceeded):                                          "the database did not answer in time",
		fmt.Errorf("read server info: failed to connect to `host=/tmp user=alice`: %w", dial):           "cannot reach the database",
		fmt.Errorf("count records: %w", sqlStateErr{"permission denied for table operations", "42501"}): "the database refused: permission denied for table operations",
		fmt.Errorf("read the revealed intent (audit record acme#12): %w", dial):                         "cannot reach the database (audit record acme#12)",
		errors.New("the filter's state:bogus is not a state\nsecond line"):                              "the filter's state:bogus is not a state",
		fmt.Errorf("x: %w", sqlStateErr{"bad\x1b[31m", "22023"}):                                        "the database refused: bad�[31m",
	} {
		require.Equal(t, want, plainError(err), "%v", err)
	}
	require.Empty(t, plainError(nil))
}

// E shows the last error whole over the screen, and esc closes it.
func TestErrorDetailsView(t *testing.T) {
	t.Parallel()
	goldens(t, "error-details", func(t *testing.T, w, h int) string {
		hs := newHarness(t, newFakeSource(), w, h)
		hs.keys(":ops<enter>")
		hs.src.setDown(true)
		hs.send(hs.lastTick())
		hs.keys("E")
		return hs.view()
	})
	hs := newHarness(t, newFakeSource(), 120, 40)
	hs.keys(":ops<enter>")
	hs.src.setDown(true)
	hs.send(hs.lastTick())
	hs.keys("E")
	require.Contains(t, hs.view(), "Error details")
	hs.keys("<esc>")
	require.NotContains(t, hs.view(), "Error details")
	require.Contains(t, hs.view(), "database unreachable")
}
