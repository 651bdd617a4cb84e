// Package purgereport is a retention purge as the console and the CLI
// show it: the DryRun counted before it runs, its Progress after each
// batch and its Result. internal/retention purges and fills them in; they
// need no driver, so the console shows them without depending on pgx.
package purgereport

import "time"

// Progress is a running purge's state after a batch, and that batch's
// pace.
type Progress struct {
	Run     int64
	Purged  int64
	Batches int
	// Records is what the batch purged, in Took.
	Records int64
	Took    time.Duration
	// Slowdown is the batch's time per record over its loop's fastest
	// batch so far (Paced; 0 for a fixed pace), and Pause how long the
	// loop waits before its next batch.
	Slowdown float64
	Pause    time.Duration
}

// Result is a finished purge: its run and its audit records.
type Result struct {
	Run    int64 `json:"run"`
	Purged int64 `json:"purged"`
	// TombstonesExpired counts the expired tombstones the run removed (of
	// its tool, or every tool's).
	TombstonesExpired int64 `json:"tombstones_expired"`
	// StartSeq is this call's start record (a resume record when it
	// resumed a run), AuditSeq the run's result record; both are on
	// AuditTenant's chain, "" (events outside any tenant).
	StartSeq    int64  `json:"start_seq"`
	AuditTenant string `json:"audit_tenant"`
	AuditSeq    int64  `json:"audit_seq"`
}

// DryRun is what a purge would delete, counted before it runs.
type DryRun struct {
	Count int64 `json:"count"`
	// Before is the purge's cut-off: records whose retention ended before
	// it go. It is the parameters' Before, else the cut-off of the
	// unfinished run the purge resumes, else the database time of the
	// count. A purge given it takes what was counted and nothing that
	// expired since (fewer if records changed meanwhile: held, say).
	Before time.Time `json:"before"`
	// Resumes is the unfinished run of the same tool and cut-off that the
	// purge resumes (0: none).
	Resumes int64 `json:"resumes,omitempty"`
}
