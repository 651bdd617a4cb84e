package readmodel

import (
	"fmt"
	"time"
)

// ToolPolicy is a tool's retention: as its service recorded it (ops.New),
// else as the catalog gives it.
type ToolPolicy struct {
	// Retention is how long a completed record is kept (0: the library's
	// default, ops.DefaultRetention).
	Retention time.Duration
	// RetryWindow is the longest a caller may retry or recover an
	// operation (0: the retention).
	RetryWindow time.Duration
	// AfterExpiry is what a late retry gets once the record was purged:
	// "reexecute" (the default) or "reject".
	AfterExpiry string
}

// Count is a figure of the review. Up to CountCap it is exact; above it,
// it is the planner's estimate (Estimated) for a role that sees every
// tenant, or a lower bound (AtLeast: N or more) for one that sees some: a
// count that grew with the table would slow the review down with it. A
// purge's dry run counts exactly.
type Count struct {
	N         int64 `json:"n"`
	Estimated bool  `json:"estimated,omitempty"`
	AtLeast   bool  `json:"at_least,omitempty"`
}

// PendingRef is a tool's pending record whose lease expired first.
type PendingRef struct {
	ID             int64     `json:"id"`
	LeasedAt       time.Time `json:"leased_at"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// Stuck: the lease expired more than the context's stuck_after ago.
	Stuck bool `json:"stuck"`
}

// ToolReview is one tool's retention: its policy and what it means for the
// records in the store now.
type ToolReview struct {
	Tool      string `json:"tool"`
	InCatalog bool   `json:"in_catalog"`
	InStore   bool   `json:"in_store"`
	// The policy in force: the recorded one, else the catalog's, with the
	// defaults filled in. InCatalog: one of the two gives it.
	Retention   time.Duration `json:"retention"`
	RetryWindow time.Duration `json:"retry_window"`
	AfterExpiry string        `json:"after_expiry"`
	// Completed records whose retention ends within 24 hours and within 7
	// days (the second includes the first).
	Expiring24h Count `json:"expiring_24h"`
	Expiring7d  Count `json:"expiring_7d"`
	// Expired counts completed records whose retention has ended; Purgeable
	// those of them a purge deletes now: not held, without unreviewed
	// conflicts. Held and Conflicted (exact: they are few) are the expired
	// records each keeps.
	Expired    Count `json:"expired"`
	Purgeable  Count `json:"purgeable"`
	Held       int64 `json:"held"`
	Conflicted int64 `json:"conflicted"`
	// OldestPending is the pending record whose lease expired first.
	OldestPending *PendingRef `json:"oldest_pending,omitempty"`
	// StuckPastRetention counts pending records whose lease expired longer
	// than the retention ago.
	StuckPastRetention Count `json:"stuck_past_retention"`
	// Warnings are what an operator must see before purging.
	Warnings []string `json:"warnings"`
}

// Review is the retention review: every tool of the store and of the
// catalog, by name.
type Review struct {
	DBTime time.Time    `json:"db_time"`
	Tools  []ToolReview `json:"tools"`
	// Scoped: the role sees some tenants only, and the figures are theirs.
	Scoped bool `json:"scoped"`
	// UnfinishedPurges are purge runs started and never finished, each a
	// warning. Only admins of every tenant see purge runs: for other
	// roles it is empty.
	UnfinishedPurges []UnfinishedPurge `json:"unfinished_purges"`
}

// UnfinishedPurge is a purge run started and never finished: its start
// record is in the audit trail, its result record is not, and it may have
// purged records already. Its role finishes it by purging again with the
// same tool, which resumes it.
type UnfinishedPurge struct {
	Run int64 `json:"run"`
	// Role started the run (the authenticated role); DisplayName is the
	// name it claimed.
	Role        string    `json:"role"`
	DisplayName string    `json:"display_name,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	Reason      string    `json:"reason"`
	// Tool is the run's tool ("": every tool), Before its cut-off.
	Tool   string    `json:"tool,omitempty"`
	Before time.Time `json:"before"`
	// Purged counts the records it purged so far; MayPurge is the most it
	// may purge (its dry runs' promise; nil for a run started before
	// promises were recorded, which must be resumed before it purges more).
	Purged   int64  `json:"purged"`
	MayPurge *int64 `json:"may_purge,omitempty"`
	// LastBatchAt is when its last batch committed (nil: none recorded
	// since it started or was resumed): a recent one is a purge under way.
	LastBatchAt *time.Time `json:"last_batch_at,omitempty"`
	// StartSeq is its start record on the "" chain (nil: started before
	// start records, migration 00017, or not sealed yet).
	StartSeq *int64 `json:"start_seq,omitempty"`
}

// Warnings counts the warnings of every tool and the unfinished purges.
func (r Review) Warnings() int {
	n := len(r.UnfinishedPurges)
	for _, t := range r.Tools {
		n += len(t.Warnings)
	}
	return n
}

// Warning says what the run is and how to finish it, in one line. Its
// role, name and reason are stored text: clean it before printing.
func (u UnfinishedPurge) Warning() string {
	who := u.Role
	if u.DisplayName != "" {
		who += " (" + u.DisplayName + ")"
	}
	what, flag := "every tool", ""
	if u.Tool != "" {
		what, flag = "tool "+u.Tool, " --tool "+u.Tool
	}
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
	text := fmt.Sprintf("purge run %d (%s) unfinished: started %s by %s, reason %q; %d purged so far",
		u.Run, what, stamp(u.StartedAt), who, u.Reason, u.Purged)
	if u.MayPurge != nil {
		text += fmt.Sprintf(" of at most %d", *u.MayPurge)
	}
	if u.LastBatchAt != nil {
		text += ", last batch " + stamp(*u.LastBatchAt)
	}
	if u.StartSeq != nil {
		text += fmt.Sprintf("; start record #%d, no result record yet", *u.StartSeq)
	} else {
		text += "; no start record (started before purges were audited up front)"
	}
	return text + fmt.Sprintf(". %s finishes it: opsdesk retention purge%s --yes", u.Role, flag)
}
