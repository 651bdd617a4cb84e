package ui

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strings"

	"github.com/opsdesk/opsdesk/internal/termtext"
)

// plainError is the one line the console shows for err: what happened in
// words, without the Go error's chain of prefixes or the driver's
// connection details, which the error's details (E) show whole. An audit
// record the error names is kept: it says where to look.
func plainError(err error) string {
	if err == nil {
		return ""
	}
	msg := termtext.Clean(err.Error())
	var state interface{ SQLState() string } // the driver's error, without importing it
	var timeout interface{ Timeout() bool }
	var netErr *net.OpError
	var plain string
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &timeout) && timeout.Timeout()):
		plain = "the database did not answer in time"
	case errors.Is(err, context.Canceled):
		plain = "the request was given up (a newer one replaced it, or you left)"
	case errors.As(err, &state):
		// The database's own words, which say what to fix, without the
		// driver's "ERROR:" and SQLSTATE around them.
		text := msg
		if e, ok := state.(error); ok {
			text = termtext.Clean(e.Error())
		}
		text = strings.TrimPrefix(text, "ERROR: ")
		text = sqlState.ReplaceAllString(text, "")
		plain = "the database refused: " + text
	case errors.As(err, &netErr) || strings.Contains(msg, "failed to connect") || strings.Contains(msg, "dial ") ||
		strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host"):
		plain = "cannot reach the database"
	default:
		first, _, _ := strings.Cut(err.Error(), "\n")
		return termtext.Clean(first)
	}
	if ref := auditRefIn.FindString(msg); ref != "" {
		plain += " (" + ref + ")"
	}
	return plain
}

var (
	sqlState   = regexp.MustCompile(` \(SQLSTATE [0-9A-Z]{5}\)$`)
	auditRefIn = regexp.MustCompile(`audit record [^ ():]+`)
)

// errorDetail is err whole, for the error's details (E).
func errorDetail(err error) string {
	if err == nil {
		return ""
	}
	return termtext.CleanLines(err.Error())
}
