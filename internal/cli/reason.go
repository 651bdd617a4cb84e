package cli

import (
	"strings"
	"time"

	"github.com/opsdesk/opsdesk/reconcile"
)

// checkReason refuses, before anything is read or audited, a --reason that
// is missing or only white space (the database trims it as
// reconcile.IsSpace does, so a tab or U+3000 is no reason): a slip of the
// shell is a usage error, not an audited failure. A reason the database
// refuses for what it holds (too long, a NUL) is still its to refuse and
// audit. why says what the reason is for.
func checkReason(reason, why string) error {
	if strings.TrimFunc(reason, reconcile.IsSpace) == "" {
		if reason == "" {
			return usagef("--reason is required: %s", why)
		}
		return usagef("--reason is blank: %s, and white space is no reason", why)
	}
	return nil
}

// maxSnooze is the longest --snooze the database takes: decide refuses a
// snooze time more than interval '1 year' after its now(), which is 365
// days at the least (366 across a leap day).
const maxSnooze = 365 * 24 * time.Hour

// checkSnooze refuses a --snooze the database would refuse.
func checkSnooze(d time.Duration, as string) error {
	switch {
	case d == 0:
		return usagef("--as %s needs --snooze, such as --snooze 2h", as)
	case d < 0:
		return usagef("--snooze %s: give how long from now, such as --snooze 2h", d)
	case d > maxSnooze:
		return usagef("--snooze %s: at most a year (%s), as the database takes", d, maxSnooze)
	}
	return nil
}
