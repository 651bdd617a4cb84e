package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Config configures a Store.
type Config struct {
	// Tools is the policy of every tool this store runs. A request for a
	// tool not listed here is refused with ErrUnknownTool.
	Tools map[string]Policy
	// Owner names this worker in lease records and conflicts (default:
	// hostname/pid). It should be unique per process.
	Owner string
	// Logger receives one record per call (tenant, tool, version, key,
	// fingerprint prefix, disposition, latency), never raw intents or
	// results. Nil: no logging.
	Logger *slog.Logger
	// MaxIntentBytes bounds a request's canonical intent ({tool, version,
	// intent} in RFC 8785 form), in bytes; 0 means DefaultMaxIntentBytes
	// (256 KiB). A larger one is refused with ErrInvalidRequest before
	// anything runs.
	MaxIntentBytes int
	// MaxResultBytes bounds a result or rejection payload as JSON, in
	// bytes; 0 means DefaultMaxResultBytes (1 MiB). DoTx refuses a larger
	// one with ErrInvalidRequest before it commits; DoExternal, whose
	// provider already acted, stores a marker in its place (see
	// Reply.NotStored).
	MaxResultBytes int
	// Metrics receives each call's answer, step durations and events
	// (takeovers, lost leases…), never a key, intent or result; see
	// package ops/opsprom for Prometheus. Nil: no metrics.
	Metrics Metrics
	// Keyring turns on envelope encryption at rest: every intent, result,
	// rejection payload and conflicting request is stored sealed with
	// AES-256-GCM under the keyring's current key, bound to its record's
	// identity, and fingerprints become HMAC-SHA-256 under its fingerprint
	// key instead of plain SHA-256. Replays are unchanged, byte for byte.
	// Records written before it was set still replay; once set, keep it:
	// a store without the keyring cannot open what was sealed (see README,
	// security). Nil: values are stored as plain JSON.
	Keyring Keyring
}

// Store runs operations against the operation store.
type Store struct {
	pool   Pool
	tools  map[string]Policy
	owner  string
	logger *slog.Logger
	// metrics is Config.Metrics, nil when unset.
	metrics Metrics
	// maxIntent and maxResult are Config's size limits, defaults applied.
	maxIntent, maxResult int
	// keyring is Config.Keyring, nil when unset.
	keyring Keyring
	// heartbeat overrides the lease renewal interval (a third of the
	// tool's lease) in tests that play a paused process.
	heartbeat time.Duration
}

// nilInside tells whether m is an interface holding a nil pointer (or
// map, func…): set, but with nothing to call.
func nilInside(m any) bool {
	if m == nil {
		return false
	}
	v := reflect.ValueOf(m)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// New returns a Store over pool, which must reach a database migrated by
// opsdesk migrate (or ops/opsmigrate), as a role granted opsdesk_service.
//
// New asks Config.Keyring, if set, for its current and fingerprint keys,
// and refuses a keyring that lacks them. With tools configured, New
// records their policies in the store (see RecordPolicies), waiting at
// most five seconds: the console and doctor read them there. A refusal (a
// role not granted opsdesk_service, a schema older than this library's, a
// value out of the store's bounds) is New's error, wrapping ErrStoreRefused. An
// unreachable store is not: the Store is returned, its calls answer
// ErrUnavailable until the store is back, the Logger gets a warning, and
// the service may call RecordPolicies again. New does not compare the
// schema's version with this library's: opsmigrate.Check does, for a
// service that wants to refuse to start on a mismatch.
func New(pool Pool, cfg Config) (*Store, error) {
	if pool == nil || nilInside(pool) {
		return nil, errors.New("ops: nil pool")
	}
	tools := make(map[string]Policy, len(cfg.Tools))
	for name, p := range cfg.Tools {
		if err := checkName("tool", name, maxNameBytes); err != nil {
			return nil, fmt.Errorf("ops: tool policy: %w", err)
		}
		p, err := p.withDefaults(name)
		if err != nil {
			return nil, fmt.Errorf("ops: %w", err)
		}
		tools[name] = p
	}
	owner := cfg.Owner
	if owner == "" {
		host, _ := os.Hostname()
		owner = host + "/" + strconv.Itoa(os.Getpid())
	}
	if err := checkName("owner", owner, maxNameBytes); err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	maxIntent, err := limit("MaxIntentBytes", cfg.MaxIntentBytes, DefaultMaxIntentBytes)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	maxResult, err := limit("MaxResultBytes", cfg.MaxResultBytes, DefaultMaxResultBytes)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	if nilInside(cfg.Metrics) {
		// A nil *opsprom.Metrics is a non-nil interface: the first call
		// would panic inside the hook, after its operation had run.
		return nil, fmt.Errorf("ops: Config.Metrics is a nil %T: build it (opsprom.New), or leave Metrics unset for none", cfg.Metrics)
	}
	if err := checkKeyring(cfg.Keyring); err != nil {
		return nil, fmt.Errorf("ops: Config.Keyring: %w", err)
	}
	s := &Store{pool: pool, tools: tools, owner: owner, logger: logger, metrics: cfg.Metrics, maxIntent: maxIntent,
		maxResult: maxResult, keyring: cfg.Keyring}
	ctx, cancel := context.WithTimeout(context.Background(), recordPoliciesTimeout)
	defer cancel()
	if err := s.RecordPolicies(ctx); err != nil {
		if errors.Is(err, ErrStoreRefused) {
			return nil, fmt.Errorf("ops: %w", err)
		}
		logger.Warn("tool policies not recorded: the console and doctor will not see them until RecordPolicies succeeds",
			slog.String("error", err.Error()))
	}
	return s, nil
}

// Owner is the name this store's attempts are recorded under.
func (s *Store) Owner() string { return s.owner }

// Policy returns the policy this store runs tool under, defaults applied;
// ok is false for a tool the store has none for (its requests are refused
// with ErrUnknownTool). Middleware checks its configuration with it.
func (s *Store) Policy(tool string) (p Policy, ok bool) {
	p, ok = s.tools[tool]
	return p, ok
}

// call is a validated request with its policy and fingerprint.
type call struct {
	Request
	policy      Policy
	fingerprint Fingerprint
	canonical   []byte // the canonical request, stored with the record
	// keyring is the store's (nil: no encryption); sealedIntent is
	// canonical sealed, once a write needed it.
	keyring      Keyring
	sealedIntent []byte
	start        time.Time
	obs          callObservation // with a metrics hook only
}

// newCall validates req for a call of the given kind (local or external).
func (s *Store) newCall(req Request, external bool) (*call, error) {
	c := &call{Request: req, start: time.Now(), keyring: s.keyring}
	if err := req.validate(); err != nil {
		return c, err
	}
	p, ok := s.tools[req.Tool]
	if !ok {
		return c, fmt.Errorf("tool %q has no policy in this store: %w", req.Tool, ErrUnknownTool)
	}
	c.policy = p
	if (p.Effect != EffectLocal) != external {
		want := "DoTx"
		if p.Effect != EffectLocal {
			want = "DoExternal"
		}
		return c, fmt.Errorf("tool %q has effect %q: run it with %s: %w", req.Tool, p.Effect, want, ErrWrongEffect)
	}
	if v, ok := req.Intent.(Validator); ok {
		if err := v.Validate(); err != nil {
			return c, &InvalidRequestError{Field: "intent", Problem: err.Error(), Err: err}
		}
	}
	canon, fp, err := canonical(req.Tool, req.Version, req.Intent, s.maxIntent)
	if err != nil {
		return c, err
	}
	c.canonical, c.fingerprint = canon, fp
	if s.keyring != nil {
		// Keyed, so that the stored fingerprint of a low-entropy intent
		// cannot be matched against a dictionary of guesses.
		ids := s.keyring.FingerprintKeyIDs()
		if len(ids) == 0 {
			return c, &UnavailableError{Err: errors.New("ops: the keyring names no fingerprint key")}
		}
		if c.fingerprint, err = keyedFingerprint(s.keyring, ids[0], canon); err != nil {
			return c, &UnavailableError{Err: fmt.Errorf("%s: %w", c.Identity, err)}
		}
	}
	return c, nil
}

// dbtx is what both a pool and a transaction offer.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// lease is an attempt's ownership of a record.
type lease struct {
	ID      int64
	Attempt int
	Version int64
}

// The library's writes take their times from clock_timestamp(), the
// database clock at the write, not now(), the transaction's start: DoTx
// writes its record after fn, in fn's transaction, and the state machine
// (migration 00024) refuses a time more than ten seconds before the clock.
// An insert reads the clock once, so that a lease and a completion start
// at the same instant; an update names it in each assignment, which a
// wait for a row that changed meanwhile computes again.

const reserveSQL = `
INSERT INTO opsdesk.operations
    (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt, leased_at, lease_expires_at, intent)
SELECT $1, $2, $3, $4, $5, $6, 'pending', $7, 1, clock.t, clock.t + $8 * interval '1 microsecond', $9
FROM (SELECT clock_timestamp() AS t) clock
ON CONFLICT (tenant, tool, key) DO NOTHING
RETURNING id, attempt, version`

// reserveUnlessPurgedSQL is reserveSQL for tools that reject retries
// after expiry: a live tombstone of the identity stops the insert too.
const reserveUnlessPurgedSQL = `
INSERT INTO opsdesk.operations
    (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt, leased_at, lease_expires_at, intent)
SELECT $1, $2, $3, $4, $5, $6, 'pending', $7, 1, clock.t, clock.t + $8 * interval '1 microsecond', $9
FROM (SELECT clock_timestamp() AS t) clock
WHERE NOT EXISTS (SELECT FROM opsdesk.tombstones t
                  WHERE t.tenant = $1 AND t.tool = $2 AND t.key = $3 AND t.expires_at > now())
ON CONFLICT (tenant, tool, key) DO NOTHING
RETURNING id, attempt, version`

// reserve inserts a pending record; ok is false when the identity exists
// (or, for a tool that rejects retries after expiry, was purged).
// A concurrent reservation of the same identity blocks until it commits or
// rolls back: the primary key serializes attempts. answered tells whether
// the statement's row arrived, which matters when it failed (see
// mayHaveCommitted).
func (s *Store) reserve(ctx context.Context, q dbtx, c *call) (l lease, ok, answered bool, err error) {
	sql := reserveSQL
	if c.policy.AfterExpiry == RejectAfterExpiry {
		sql = reserveUnlessPurgedSQL
	}
	intent, err := c.storedIntent()
	if err != nil {
		return l, false, false, err
	}
	return queryLease(ctx, q, sql, c.Tenant, c.Tool, c.Key, c.Version, c.fingerprint[:],
		string(c.policy.Effect), s.owner, c.policy.Lease.Microseconds(), intent)
}

// queryLease runs a statement that returns at most one lease row. ok tells
// whether it returned one; answered whether the row arrived, even if the
// statement failed afterwards.
func queryLease(ctx context.Context, q dbtx, sql string, args ...any) (l lease, ok, answered bool, err error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return l, false, false, err
	}
	defer rows.Close()
	if rows.Next() {
		answered = true
		if err := rows.Scan(&l.ID, &l.Attempt, &l.Version); err != nil {
			return l, false, answered, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return l, false, answered, err
	}
	return l, answered, answered, nil
}

const takeOverSQL = `
UPDATE opsdesk.operations
SET state = 'pending', owner = $5, attempt = attempt + 1, effect = $7,
    leased_at = clock_timestamp(), lease_expires_at = clock_timestamp() + $6 * interval '1 microsecond',
    updated_at = clock_timestamp(), version = version + 1
WHERE tenant = $1 AND tool = $2 AND key = $3 AND version = $4
  AND (state = 'released' OR (state = 'pending' AND lease_expires_at <= clock_timestamp()))
RETURNING id, attempt, version`

// takeOver leases a released record or one whose lease expired, as a new
// attempt under the tool's current effect. ok is false when the record changed since it was read (the
// caller reads it again); the lease condition is checked again because lease
// renewals do not bump the version.
func (s *Store) takeOver(ctx context.Context, q dbtx, c *call, seen int64) (l lease, ok, answered bool, err error) {
	return queryLease(ctx, q, takeOverSQL, c.Tenant, c.Tool, c.Key, seen, s.owner,
		c.policy.Lease.Microseconds(), string(c.policy.Effect))
}

// insertCompletedSQL is DoTx's record in its common case, an identity with
// no record: inserted completed, in the transaction of the business writes,
// once fn has run. Nobody ever sees it pending, as the reservation's own
// transaction hid a pending record anyway. Like the reservation it waits
// for a concurrent twin's transaction; if the twin committed, the primary
// key refuses the insert (unique_violation: the caller rolls back and
// replays). It has no ON CONFLICT clause: that clause probes the key before
// every insert (6% of the server's time for DoTx's statements in a perf profile, issue 20), to
// spare an error that only a race meets; and an insert that fails rather
// than inserting nothing can be sent with the COMMIT in one round trip,
// since the COMMIT then never runs. %s is the extra condition of tools that
// reject retries after expiry (no live tombstone): there the insert may
// return no row, so it is sent alone.
const insertCompletedSQL = `
INSERT INTO opsdesk.operations
    (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt, leased_at, lease_expires_at, intent,
     outcome, result, result_ref, completed_at, expires_at)
SELECT $1, $2, $3, $4, $5, 'local', 'completed', $6, 1, clock.t, clock.t, $7,
       $8, $9, $10, clock.t, clock.t + $11 * interval '1 microsecond'
FROM (SELECT clock_timestamp() AS t) clock
%s
RETURNING id`

var (
	insertCompletedStmt             = fmt.Sprintf(insertCompletedSQL, "")
	insertCompletedUnlessPurgedStmt = fmt.Sprintf(insertCompletedSQL, `WHERE NOT EXISTS (SELECT FROM opsdesk.tombstones t
                  WHERE t.tenant = $1 AND t.tool = $2 AND t.key = $3 AND t.expires_at > now())`)
)

// completedArgs are insertCompletedSQL's arguments for c's record.
func (s *Store) completedArgs(c *call, outcome RecordOutcome, result []byte, ref *string) ([]any, error) {
	intent, err := c.storedIntent()
	if err != nil {
		return nil, err
	}
	if result, err = c.storedResult(result); err != nil {
		return nil, err
	}
	return []any{c.Tenant, c.Tool, c.Key, c.Version, c.fingerprint[:], s.owner, intent,
		string(outcome), result, ref, c.policy.Retention.Microseconds()}, nil
}

// insertCompleted stores a local call's record completed, attempt 1, in
// tx, for a tool that rejects retries after expiry; ok is false when the
// identity has a record or a live tombstone, and nothing was inserted
// (tx must then be rolled back).
func (s *Store) insertCompleted(ctx context.Context, tx pgx.Tx, c *call, outcome RecordOutcome, result []byte, ref *string) (id int64, ok bool, err error) {
	args, err := s.completedArgs(c, outcome, result, ref)
	if err != nil {
		return 0, false, err
	}
	err = tx.QueryRow(ctx, insertCompletedUnlessPurgedStmt, args...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) || isTwin(err) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// insertCompletedCommit sends the record's insert and the COMMIT of tx in
// one round trip. ok is false when a twin's record committed first: the
// insert failed, the COMMIT did not run, and tx must be rolled back. Any
// other failure of the insert is returned as it is: the server runs
// nothing after it, so nothing committed. Once sent, the pair is not cut
// short by ctx, and the COMMIT's failure is what commit makes of it: lost
// on the way, it is an outcome nobody knows (unknown's error).
func (s *Store) insertCompletedCommit(ctx context.Context, tx pgx.Tx, c *call, outcome RecordOutcome, result []byte, ref *string,
	unknown func(error) error) (id int64, ok bool, err error) {
	args, err := s.completedArgs(c, outcome, result, ref)
	if err != nil {
		return 0, false, err
	}
	wctx, cancel, err := shielded(ctx)
	if err != nil {
		return 0, false, notWritten(err)
	}
	defer cancel()
	var b pgx.Batch
	b.Queue(insertCompletedStmt, args...)
	b.Queue("commit")
	br := tx.SendBatch(wctx, &b)
	defer br.Close()
	if err := br.QueryRow().Scan(&id); err != nil {
		var pgErr *pgconn.PgError
		switch {
		case isTwin(err):
			return 0, false, nil
		case errors.As(err, &pgErr) || !mayHaveCommitted(err, false):
			return 0, false, err
		}
		return 0, false, unknown(err) // the answer to the pair was lost
	}
	if _, err := br.Exec(); err != nil {
		if mayHaveCommitted(err, true) {
			return 0, false, unknown(err)
		}
		return 0, false, notWritten(err)
	}
	return id, true, nil
}

// isTwin tells whether err is the primary key refusing a record because a
// concurrent twin's committed first.
func isTwin(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "operations_pkey"
}

const completeSQL = `
UPDATE opsdesk.operations
SET state = 'completed', outcome = $6, result = $7, result_ref = $8,
    completed_at = clock_timestamp(), expires_at = clock_timestamp() + $9 * interval '1 microsecond',
    updated_at = clock_timestamp(), version = version + 1
WHERE tenant = $1 AND tool = $2 AND key = $3 AND owner = $4 AND attempt = $5 AND state = 'pending'`

// complete stores an attempt's result: a compare-and-set on (owner,
// attempt) so that a zombie can never overwrite a newer owner's or an
// operator's decision.
func (s *Store) complete(ctx context.Context, q dbtx, c *call, l lease, outcome RecordOutcome, result []byte, ref *string) error {
	result, err := c.storedResult(result)
	if err != nil {
		return err
	}
	tag, err := q.Exec(ctx, completeSQL, c.Tenant, c.Tool, c.Key, s.owner, l.Attempt,
		string(outcome), result, ref, c.policy.Retention.Microseconds())
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return &LostOwnershipError{Identity: c.Identity, OperationID: l.ID, Owner: s.owner, Attempt: l.Attempt}
	}
	return nil
}

// conflictSQL stores the refused attempt's canonical request with it
// ($9, within Config.MaxIntentBytes like every intent), so that an
// operator can see what differs; the service can write it, never read it.
const conflictSQL = `
WITH refused AS (
    INSERT INTO opsdesk.conflicts
        (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner, intent)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    RETURNING id
)
UPDATE opsdesk.operations
SET conflict_count = conflict_count + 1, last_conflict_at = clock_timestamp()
WHERE tenant = $1 AND tool = $2 AND key = $3 AND id = $4
RETURNING (SELECT id FROM refused)`

// recordConflict records a refused attempt and counts it on the original
// record, whose state, result and version stay as they are: a caller
// retrying with a changed intent must not invalidate the decision an
// operator is about to make on the record.
func (s *Store) recordConflict(ctx context.Context, q dbtx, c *call, rec *Record) error {
	conflict := &IntentConflictError{
		Identity: c.Identity, OperationID: rec.ID, Stored: rec.Fingerprint, Attempted: c.fingerprint,
		StoredVersion: rec.ToolVersion, AttemptedVersion: c.Version,
	}
	wctx, cancel, err := writeContext(ctx, q)
	if err != nil {
		return fmt.Errorf("record intent conflict on %s: %w", c.Identity, notWritten(err))
	}
	defer cancel()
	attempted := c.canonical
	if c.keyring != nil {
		if attempted, err = seal(c.keyring, "conflict", c.Identity, c.canonical); err != nil {
			return &UnavailableError{Err: fmt.Errorf("record intent conflict on %s: %w", c.Identity, err)}
		}
	}
	rows, _ := q.Query(wctx, conflictSQL, c.Tenant, c.Tool, c.Key, rec.ID, c.Version,
		c.fingerprint[:], rec.Fingerprint[:], s.owner, attempted)
	answered := false
	if rows.Next() {
		answered = true
		_ = rows.Scan(&conflict.ConflictID) // an error stays in rows.Err
	}
	rows.Close()
	err = rows.Err()
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ForeignKeyViolation ||
		err == nil && !answered {
		// The record read was purged (and the identity maybe created
		// again) before the conflict was recorded: start over.
		return errRace
	}
	if err != nil {
		return fmt.Errorf("record intent conflict on %s: %w", c.Identity, writeFailed(q, err, answered, func(err error) error {
			return &OutcomeUnknownError{Identity: c.Identity, OperationID: rec.ID, Attempt: rec.Attempt, Step: StepConflict, Err: err}
		}))
	}
	return conflict
}

// decision is what an attempt does with an existing record.
type decision int

const (
	decideReplay decision = iota
	decideConflict
	decideInProgress
	decideNeedsReconciliation
	decideTakeOver
)

// decide applies the state machine to an existing record.
func decide(c *call, rec *Record) decision {
	if !c.sameIntent(rec.Fingerprint) {
		return decideConflict
	}
	switch rec.State {
	case StateCompleted:
		return decideReplay
	case StateReleased:
		return decideTakeOver
	}
	if rec.leaseOutOfBounds() {
		return decideNeedsReconciliation
	}
	if !rec.LeaseExpired() {
		return decideInProgress
	}
	// An abandoned attempt may be run again only when the provider
	// deduplicates by key, both as the attempt was made and as the tool is
	// configured now. A pending local record cannot be left by a
	// transaction that kept its atomicity, so it is not trusted either.
	if rec.Effect == EffectIdempotentProvider && c.policy.Effect == EffectIdempotentProvider {
		return decideTakeOver
	}
	return decideNeedsReconciliation
}

// refusal is the error for an attempt that may not run now.
func refusal(c *call, rec *Record, d decision) error {
	switch d {
	case decideInProgress:
		return &InProgressError{Identity: c.Identity, OperationID: rec.ID, Owner: rec.Owner,
			Attempt: rec.Attempt, RetryAfter: rec.LeaseRemaining(), Running: max(0, rec.DBTime.Sub(rec.LeasedAt))}
	case decideNeedsReconciliation:
		if rec.leaseOutOfBounds() {
			return &NeedsReconciliationError{Identity: c.Identity, OperationID: rec.ID, Owner: rec.Owner,
				Attempt: rec.Attempt, LeaseEnds: rec.LeaseExpiresAt}
		}
		return &NeedsReconciliationError{Identity: c.Identity, OperationID: rec.ID, Owner: rec.Owner,
			Attempt: rec.Attempt, LeaseExpiredFor: -rec.LeaseRemaining()}
	}
	return nil
}

// errRace means the record changed between reading it and acting on it;
// the attempt starts over.
var errRace = errors.New("record changed concurrently")

// maxRaces bounds how often one call starts over after losing a race.
const maxRaces = 8
