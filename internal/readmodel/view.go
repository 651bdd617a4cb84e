package readmodel

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// State is a record's state as an operator sees it. It refines the stored
// state with the lease (live or stuck) and the outcome (rejected).
type State string

// The states shown in the console.
const (
	StatePending   State = "pending"  // pending, lease live
	StateStuck     State = "stuck"    // pending, lease expired (past the context's stuck_after)
	StateDeferred  State = "deferred" // stuck, but a person deferred it until a reminder
	StateCompleted State = "completed"
	StateRejected  State = "rejected" // completed with a business rejection
	StateReleased  State = "released"
)

// States lists every state, in the order the console shows them.
var States = []State{StatePending, StateStuck, StateDeferred, StateCompleted, StateRejected, StateReleased}

// ErrNotFound means no record matched.
var ErrNotFound = errors.New("no such operation")

// PurgedError is an identity whose record was purged: its tombstone says
// which record went and when. It is an ErrNotFound.
type PurgedError struct {
	OperationID int64     `json:"operation_id"`
	PurgedAt    time.Time `json:"purged_at"`
	// TombstoneUntil is when the tombstone goes; until then a tool that
	// rejects retries after expiry answers a late retry with
	// ops.ErrExpired, after it (or for a tool that re-executes) the retry
	// runs as new work.
	TombstoneUntil time.Time `json:"tombstone_until"`
	DBTime         time.Time `json:"db_time"`
}

// Row is one operation in a list.
type Row struct {
	ID     int64  `json:"id"`
	Tenant string `json:"tenant"`
	Tool   string `json:"tool"`
	Key    string `json:"key"`
	State  State  `json:"state"`
	// Conflicted: the record has conflicting attempts nobody reviewed.
	Conflicted    bool   `json:"conflicted"`
	ConflictCount int    `json:"conflict_count"`
	Owner         string `json:"owner"`
	Attempt       int    `json:"attempt"`
	Version       int64  `json:"version"`
	// Held: under legal hold, never purged until released.
	Held bool `json:"held"`
	// Zero times were never set (no lease, not completed, no expiry).
	LeasedAt       time.Time `json:"leased_at"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	CompletedAt    time.Time `json:"completed_at"`
	ExpiresAt      time.Time `json:"expires_at"`
	// DeferredUntil is the reminder of the record's current deferral,
	// and DeferredBy the role that deferred it (zero: none). The record
	// is deferred until then (State is StateDeferred), due after.
	DeferredUntil time.Time `json:"deferred_until"`
	DeferredBy    string    `json:"deferred_by,omitempty"`
	// DBTime is the database clock when the row was read; ages use it.
	DBTime time.Time `json:"db_time"`
}

// Detail is everything about one record but its intent and result, which
// stay hidden (revealing them is an audited action).
type Detail struct {
	Row
	ToolVersion string `json:"tool_version"`
	// FingerprintTag is "fp:" and 12 hex digits of a keyed hash of the
	// fingerprint: equal tags, equal requests. People may not read
	// fingerprints, which would give low-entropy requests away.
	FingerprintTag string     `json:"fingerprint_tag"`
	Effect         string     `json:"effect"`
	Outcome        string     `json:"outcome"`
	ResultRef      string     `json:"result_ref"`
	HasResult      bool       `json:"has_result"` // completed records store one; viewers may not read it
	LastConflictAt time.Time  `json:"last_conflict_at"`
	Conflicts      []Conflict `json:"conflicts"`
	// Decisions are people's decisions on the record that took effect,
	// oldest first, from the audit trail: who released it, when and why.
	Decisions []Decision `json:"decisions"`
}

// Decision is a person's decision on a record, as the audit trail has it.
type Decision struct {
	// AuditSeq is the audit record's sequence in the tenant's chain.
	AuditSeq int64     `json:"audit_seq"`
	At       time.Time `json:"at"`
	// Role is the authenticated database role; DisplayName what the
	// person called themselves.
	Role        string `json:"role"`
	DisplayName string `json:"display_name,omitempty"`
	// Action is decide:completed, decide:not-executed, decide:failed,
	// decide:defer or conflicts:ack.
	Action      string    `json:"action"`
	Reason      string    `json:"reason"`
	Forced      bool      `json:"forced"`
	Override    bool      `json:"override"`
	ResultRef   string    `json:"result_ref,omitempty"`
	SnoozeUntil time.Time `json:"snooze_until"`
	// HashBroken: the decision's audit record does not match its hash:
	// it was changed after it was written.
	HashBroken bool `json:"hash_broken"`
	// Machine: opsdesk reconciler decided it, by a tool's auto_reconcile
	// policy (decide marks a reconciler login's records so).
	Machine bool `json:"machine"`
}

// Conflict is a refused attempt that reused the record's key with another
// intent.
type Conflict struct {
	ID             int64     `json:"id"`
	AttemptedAt    time.Time `json:"attempted_at"`
	Owner          string    `json:"owner"`
	ToolVersion    string    `json:"tool_version"`
	FingerprintTag string    `json:"fingerprint_tag"`
	Reviewed       bool      `json:"reviewed"`
}

// Overview is the console's first screen.
type Overview struct {
	DBTime time.Time `json:"db_time"`
	// Every count but Completed is exact up to CountCap; above it, it is
	// an estimate and the matching …Estimated flag says so. Pending and
	// Stuck count pending records by their lease; Conflicted counts
	// records with unreviewed conflicts; ExpiringSoon counts completed
	// records whose retention ends within 24 hours.
	Pending          int64 `json:"pending"`
	PendingEstimated bool  `json:"pending_estimated"`
	Stuck            int64 `json:"stuck"`
	StuckEstimated   bool  `json:"stuck_estimated"`
	// Deferred counts stuck records a person deferred, whose reminder is
	// not yet due (they are not in Stuck); above CountCap it is
	// CountCap+1, a lower bound, and DeferredAtLeast says so.
	Deferred            int64 `json:"deferred"`
	DeferredAtLeast     bool  `json:"deferred_at_least"`
	Rejected            int64 `json:"rejected"`
	RejectedEstimated   bool  `json:"rejected_estimated"`
	Released            int64 `json:"released"`
	ReleasedEstimated   bool  `json:"released_estimated"`
	Conflicted          int64 `json:"conflicted"`
	ConflictedEstimated bool  `json:"conflicted_estimated"`
	ExpiringSoon        int64 `json:"expiring_soon"`
	ExpiringEstimated   bool  `json:"expiring_soon_estimated"`
	// Completed counts succeeded records; over large tables it is the
	// planner's estimate, and CompletedEstimated says so.
	Completed          int64 `json:"completed"`
	CompletedEstimated bool  `json:"completed_estimated"`
	// Scoped is set for a role that sees some tenants only: table
	// statistics cannot estimate its counts, so an …Estimated count is
	// then CountCap+1, a lower bound ("more than 1,000").
	Scoped bool `json:"scoped"`
	// OldestStuck is the stuck record whose lease expired first (a
	// deferred record is not stuck).
	OldestStuck *Row `json:"oldest_stuck,omitempty"`
	// NextDue is the deferred record whose reminder comes first.
	NextDue *Row `json:"next_due,omitempty"`
	// StuckByTool are the stuck records by tool, the tool with the
	// longest expired lease first, read among the CountCap records stuck
	// longest: when more are stuck (StuckByToolCut), the counts are lower
	// bounds and a tool whose records are all younger is left out.
	StuckByTool    []ToolStuck `json:"stuck_by_tool"`
	StuckByToolCut bool        `json:"stuck_by_tool_cut"`
	// RecentDecisions are the last decisions of the past day (RecentCap
	// at most), the newest first: who decided what, and when.
	RecentDecisions []AuditRow `json:"recent_decisions"`
}

// ToolStuck is one tool's stuck records on the overview.
type ToolStuck struct {
	Tool  string `json:"tool"`
	Stuck int64  `json:"stuck"`
	// Oldest is when the lease of its longest stuck record expired.
	Oldest time.Time `json:"oldest"`
}

// RecentCap is how many recent decisions the overview shows.
const RecentCap = 5

// CountCap is the count up to which the overview counts exactly. Above it
// an exact count would grow with the table; an estimate does not.
const CountCap = 1000

// Info describes the connection, for the status bar and doctor.
type Info struct {
	Server   string    `json:"server"`   // host or socket, and port
	Database string    `json:"database"` // database name
	Role     string    `json:"role"`     // session_user: who the server says we are
	Version  string    `json:"server_version"`
	Schema   int64     `json:"schema_version"`
	DBTime   time.Time `json:"db_time"`
}

func (e *PurgedError) Error() string {
	return fmt.Sprintf("operation %d was purged at %s", e.OperationID, e.PurgedAt.UTC().Format(time.RFC3339))
}

// Is makes a purged record not found.
func (e *PurgedError) Is(target error) bool { return target == ErrNotFound }

// AbsentError is an identity with no record (and no tombstone) that says
// whether its tenant, and its tool in that tenant, have records the role
// sees: a typo in either is then named, not left for a key's. It is an
// ErrNotFound.
type AbsentError struct {
	Tenant, Tool string
	TenantKnown  bool // the tenant has records the role sees
	ToolKnown    bool // the tenant has records of the tool
}

func (e *AbsentError) Error() string { return "no record: " + e.Check() }

// Is makes an absent identity not found.
func (e *AbsentError) Is(target error) bool { return target == ErrNotFound }

// Check says which part of the identity to check first.
func (e *AbsentError) Check() string {
	switch {
	case !e.TenantKnown:
		return "the tenant " + strconv.Quote(e.Tenant) + " has no records you can see: check the tenant's name (and your access to it)"
	case !e.ToolKnown:
		return "the tenant " + strconv.Quote(e.Tenant) + " has no records of the tool " + strconv.Quote(e.Tool) +
			": check the tool's name"
	}
	return "the tenant and the tool have records, this key has none: check the key, which must match exactly"
}

// LeaseAge is how long the current attempt has held its lease.
func (r Row) LeaseAge() time.Duration {
	if r.LeasedAt.IsZero() {
		return 0
	}
	return r.DBTime.Sub(r.LeasedAt)
}

// LeaseExpiresIn is the time left on the lease; negative once expired.
func (r Row) LeaseExpiresIn() time.Duration {
	if r.LeaseExpiresAt.IsZero() {
		return 0
	}
	return r.LeaseExpiresAt.Sub(r.DBTime)
}

// Stuck tells whether the row is pending with an expired lease.
func (r Row) Stuck() bool { return r.State == StateStuck }

// Estimated tells whether any count is an estimate.
func (o Overview) Estimated() bool {
	return o.PendingEstimated || o.StuckEstimated || o.CompletedEstimated || o.RejectedEstimated ||
		o.ReleasedEstimated || o.ConflictedEstimated || o.ExpiringEstimated
}
