package reconcile

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBatchFilterBytes is the longest filter a run may record
// (opsdesk.start_batch, migration 00029).
const MaxBatchFilterBytes = 1000

// CutBatchFilter is filter cut to MaxBatchFilterBytes (on a character,
// ending in "…") when longer, and with its control characters as
// spaces: what a run records of a long or odd filter, where refusing it
// would refuse the run.
func CutBatchFilter(filter string) string {
	filter = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(filter, "?"))
	if len(filter) <= MaxBatchFilterBytes {
		return filter
	}
	cut := filter[:MaxBatchFilterBytes-len("…")]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return cut + "…"
}

// CheckBatchFilter refuses, before the database is asked, a run's filter
// that start_batch would refuse or could not be sent: empty or blank,
// longer than MaxBatchFilterBytes, not UTF-8, or holding a control
// character (NUL among them, which PostgreSQL's text cannot hold).
func CheckBatchFilter(filter string) error {
	switch {
	case strings.TrimSpace(filter) == "":
		return fmt.Errorf("%w: a run needs the filter it was planned from, and it is empty", ErrInvalid)
	case len(filter) > MaxBatchFilterBytes:
		return fmt.Errorf("%w: a run's filter is limited to %d bytes, not %d", ErrInvalid, MaxBatchFilterBytes, len(filter))
	case !utf8.ValidString(filter):
		return fmt.Errorf("%w: a run's filter is not UTF-8", ErrInvalid)
	case strings.ContainsFunc(filter, unicode.IsControl):
		return fmt.Errorf("%w: a run's filter may not hold control characters (%q)", ErrInvalid, filter[:min(len(filter), 80)])
	}
	return nil
}

// IsUUID tells whether s is a UUID in its canonical text form, the form
// the database writes a batch id in and reads it back.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
