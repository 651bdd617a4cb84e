// Package ui is the opsdesk console: a Bubble Tea program over the
// operation store's read API (Source, which *storeview.Store implements,
// answering in internal/readmodel's types). It depends on no pgx package,
// directly or not (TestNoPgxImport): internal/cli hands it the database's
// readers and writers behind its interfaces.
//
// The root Model owns the global keys (help, the ":" command line, back,
// quit, refresh control), the window size, polling and navigation; it
// forwards everything else to the active screen. The screens are the
// overview (what needs attention), the operations list (filter, sort,
// keyset pages) and the detail of one record; each is a tea.Model with its
// own key help and size, and drops answers to all but its latest request.
//
// People's decisions go through the Decider interface (*desk.Desk).
// r on a pending record, in a list or on its detail, opens the
// reconciliation: one screen with the record, the provider's lookup (run
// at once), the decision it points at and what that does, the risk and
// the runbook, scrolled with pgdn/pgup at any size; then a reason and a
// confirmation that defaults to No (releasing an unknown external effect
// the lookup does not vouch for asks for the record's id), and the result
// with its audit record. a acknowledges conflicting attempts and v
// reveals a stored result once its audit record committed. Each flow is
// its own type over one step machine (stepMachine), a component it holds
// and acts on the events of, as a screen holds a bubbles table. The database decides what a
// role may do; the console asks once what that is and offers nothing
// else, and nothing at all in a read-only context. A decision expects
// the version the operator saw: a record changed since is refused and
// the flow shows what changed. A decision the database did not answer
// is followed at once by a read of the record, again when the database
// answers, and the result says applied (with its audit record) or not.
//
// Screens are registered in screenKinds: each declares its id, the
// navigation message it opens from, its : commands and where it goes on
// the stack, so a new screen is its own file and one line there. q quits
// from the overview only.
//
// Back means back: esc leaves a screen drilled into for the one below it,
// and from the first screen returns to where the operator was before
// their last jump (a : command, --goto), with its filter, page and cursor
// (history.go: places, each screen's mark); - swaps the last two places,
// as in k9s; x clears a list's filter. The history is bounded, and esc
// with none goes to the overview, never out of the console.
//
// No run is left half-done without a word (interrupt.go): in a flow the
// first ctrl+c stops what is under way as esc does (a bulk run starts no
// more decisions and lets those in flight finish; a reveal is given up)
// and the message line says what was decided; a second ctrl+c, or q,
// quits. Once the terminal is restored, Run writes to Config.Report what
// a flow left: a bulk run's batch and its records by outcome, or a
// decision that had not answered.
//
// Every age on screen is computed from the database time of the read that
// produced it, never from the local clock. Refresh polls at an interval
// the operator can change or pause, and holds for a moment after the
// operator's last movement so rows do not jump. The console says when the
// database is unreachable and recovers by itself when it answers again.
// A flow reads nothing while open: the status bar says refresh is paused
// in it and names the time of the flow's read "as of", and the banner
// clears the moment a probe or any query of the flow succeeds.
//
// Styles are built from one lipgloss renderer; every colour stands beside
// a glyph and a word, so NO_COLOR and monochrome terminals lose nothing.
// The package reads through the Source interface, writes through the
// Decider interface and never imports pgx.
package ui
