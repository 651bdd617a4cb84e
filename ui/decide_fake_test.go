package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/muesli/termenv"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/reconcile"
)

// fakeDecider decides on a fakeSource's records as the database
// functions do: it checks the version, the state, the lease and the
// lookup, changes the record and appends a decision with an audit
// sequence per tenant; a refusal changes nothing.
type fakeDecider struct {
	src *fakeSource

	mu       sync.Mutex
	caps     reconcile.Capabilities
	capsErr  error
	lookups  map[string]reconcile.Answer // by tool; a tool without one has no lookup
	runbooks map[string]string
	seqs     map[string]int64
	decided  []reconcile.DecideParams
	acked    []int64
	reasons  []string
	reveals  []int64
	calls    map[string]int
	// values replaces the stored intent or result a reveal returns.
	values map[reconcile.Field][]byte
	// slowReveal, when set, makes a reveal wait for its context after
	// closing it.
	slowReveal chan struct{}
	// requests are the two requests of each conflict (original,
	// attempted; nil: not recorded), as RevealConflict reads them.
	requests map[int64][2]json.RawMessage
	// refuseConflict, when set, is the refusal every conflict reveal gets.
	refuseConflict string
	// lost, when set, is the error every decision and reveal gets after
	// its call is counted: the database did not answer.
	lost error
	// lostApplied, when set, is the error a decision gets after it was
	// applied: it committed, but its answer never arrived.
	lostApplied error
}

func newFakeDecider(src *fakeSource) *fakeDecider {
	return &fakeDecider{
		src:  src,
		caps: reconcile.Capabilities{Role: "alice", Decide: true},
		lookups: map[string]reconcile.Answer{
			"deploy-service": {
				Evidence: reconcile.Evidence{Lookup: reconcile.LookupFound, Digest: sha("deploy-answer"),
					Summary: "HTTP 200 from deploy.example:443 in 84ms: found, reference DEP-4711", Ref: "DEP-4711"},
				ResultRef: "DEP-4711",
			},
			"charge-card": {
				Evidence: reconcile.Evidence{Lookup: reconcile.LookupNotFound, Digest: sha("charge-answer"),
					Summary: "HTTP 404 from pay.example:443 in 61ms: not found"},
			},
			"send-email": {
				Evidence: reconcile.Evidence{Summary: "no answer from mail.example:443: context deadline exceeded"},
				Err:      errors.New("no answer from mail.example:443: context deadline exceeded"),
			},
		},
		runbooks: map[string]string{
			"deploy-service": "The deployment may have started even though the worker never saw the answer.\n" +
				"Run the lookup first. Found: confirm completed with the deployment id (DEP-...).\n" +
				"Not found: confirm not executed; the next retry deploys again.",
			"create-ticket": "Check the ticket queue first.",
		},
		seqs:  map[string]int64{"acme": 16, "globex": 41, "initech": 7},
		calls: map[string]int{},
		requests: map[int64][2]json.RawMessage{
			// Conflict 907 changed the template, dropped the locale and
			// added a copy; 901 predates the stored requests.
			907: {json.RawMessage(fakeEmailRequest),
				json.RawMessage(`{"intent":{"cc":"ops@example.com","template":"tmpl-7732","to":"user-8812@example.com"},"tool":"send-email","version":"1"}`)},
			901: {json.RawMessage(fakeEmailRequest), nil},
		},
	}
}

// fakeEmailRequest is the original request of the send-email record with
// conflicts.
const fakeEmailRequest = `{"intent":{"locale":"en","template":"tmpl-7731","to":"user-8812@example.com"},"tool":"send-email","version":"1"}`

func (f *fakeDecider) called(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeDecider) lastDecided(t *testing.T) reconcile.DecideParams {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEqualValues(t, 0, len(f.decided), "nothing was decided")
	return f.decided[len(f.decided)-1]
}

func (f *fakeDecider) Capabilities(context.Context) (reconcile.Capabilities, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["caps"]++
	return f.caps, f.capsErr
}

func (f *fakeDecider) Runbook(tool string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runbooks[tool]
}

func (f *fakeDecider) Ask(_ context.Context, _, tool, _ string) (reconcile.Answer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["ask"]++
	a, ok := f.lookups[tool]
	return a, ok
}

// record finds a record in the source; the caller holds both locks.
func (f *fakeDecider) record(id int64) *readmodel.Row {
	for i := range f.src.rows {
		if f.src.rows[i].ID == id {
			return &f.src.rows[i]
		}
	}
	return nil
}

// answer appends an audit record to the tenant's chain; a refusal comes
// back as the database's does.
func (f *fakeDecider) answer(r *readmodel.Row, code, msg string) (reconcile.Result, error) {
	tenant := ""
	if r != nil {
		tenant = r.Tenant
	}
	f.seqs[tenant]++
	res := reconcile.Result{Outcome: reconcile.Succeeded, Tenant: tenant, Seq: f.seqs[tenant]}
	if r != nil {
		res.State, res.Version = string(r.State), r.Version
	}
	if code == "" {
		return res, nil
	}
	res.Outcome, res.Code, res.Message = reconcile.Denied, code, msg
	if code == "changed" || code == "invalid" || code == "not_found" {
		res.Outcome = reconcile.FailedOut
	}
	return res, &reconcile.RefusedError{Result: res}
}

func (f *fakeDecider) Decide(_ context.Context, _ string, p reconcile.DecideParams) (reconcile.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.src.mu.Lock()
	defer f.src.mu.Unlock()
	f.calls["decide"]++
	f.decided = append(f.decided, p)
	if f.lost != nil {
		return reconcile.Result{}, f.lost
	}
	r := f.record(p.OperationID)
	switch {
	case r == nil:
		return f.answer(nil, "not_found", fmt.Sprintf("no operation %d (or not visible to alice)", p.OperationID))
	case p.Reason == "":
		return f.answer(r, "invalid", "a reason is required")
	case r.Version != p.ExpectVersion:
		return f.answer(r, "changed", fmt.Sprintf("changed since you looked: now version %d (%s), you saw version %d", r.Version, r.State, p.ExpectVersion))
	case !r.Pending():
		return f.answer(r, "not_pending", "the record is "+string(r.State)+", not pending: there is nothing to decide")
	case r.LeaseExpiresAt.After(dbNow) && p.Decision != reconcile.Defer && !p.Force:
		return f.answer(r, "lease_live", "the lease is live: deciding needs force")
	case !p.Override && p.Evidence.Contradicts(p.Decision, p.ResultRef):
		return f.answer(r, "contradicts_lookup", "the lookup contradicts the decision: deciding needs override")
	}
	switch p.Decision {
	case reconcile.Completed:
		r.State, r.CompletedAt, r.ExpiresAt = readmodel.StateCompleted, dbNow, dbNow.Add(7*24*time.Hour)
		f.src.refs[r.ID] = p.ResultRef
	case reconcile.Failed:
		r.State, r.CompletedAt, r.ExpiresAt = readmodel.StateRejected, dbNow, dbNow.Add(7*24*time.Hour)
	case reconcile.NotExecuted:
		r.State = readmodel.StateReleased
	case reconcile.Defer:
		// As the store reads it: out of the queue until the reminder.
		until := p.SnoozeUntil
		if until.IsZero() {
			until = dbNow.Add(p.SnoozeFor) // the decision's time, as desk.Decide asks
		}
		r.DeferredUntil, r.DeferredBy = until, "alice"
		if r.State == readmodel.StateStuck {
			r.State = readmodel.StateDeferred
		}
	}
	if p.Decision != reconcile.Defer {
		r.Version++
		r.UpdatedAt = dbNow
	}
	res, err := f.answer(r, "", "")
	f.src.decisions[r.ID] = append(f.src.decisions[r.ID], readmodel.Decision{
		AuditSeq: res.Seq, At: dbNow, Role: "alice", DisplayName: "Alice Example", Action: "decide:" + string(p.Decision),
		Reason: p.Reason, Forced: p.Force, Override: p.Override, ResultRef: p.ResultRef, SnoozeUntil: r.DeferredUntil,
	})
	if f.lostApplied != nil {
		return reconcile.Result{}, f.lostApplied
	}
	return res, err
}

func (f *fakeDecider) AckConflicts(_ context.Context, id int64, seen []int64, reason string) (reconcile.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.src.mu.Lock()
	defer f.src.mu.Unlock()
	f.calls["ack"]++
	f.acked = append(f.acked, id)
	f.reasons = append(f.reasons, reason)
	r := f.record(id)
	if r == nil {
		return f.answer(nil, "not_found", "no such operation")
	}
	cs := f.src.conflicts[id]
	if !slices.ContainsFunc(cs, func(c readmodel.Conflict) bool { return !c.Reviewed }) {
		return f.answer(r, "no_conflicts", "the record has no unreviewed conflicts")
	}
	for i := range cs {
		cs[i].Reviewed = true
	}
	r.Conflicted = false
	res, err := f.answer(r, "", "")
	f.src.decisions[id] = append(f.src.decisions[id], readmodel.Decision{
		AuditSeq: res.Seq, At: dbNow, Role: "alice", DisplayName: "Alice Example", Action: "conflicts:ack", Reason: reason,
	})
	return res, err
}

// revealCall counts a reveal (call) of id, a record's or a conflict's,
// and keeps its reason, for the tests' assertions; it answers the lost
// connection's error when lost is set.
func (f *fakeDecider) revealCall(call string, id int64, reason string) error {
	f.calls[call]++
	f.reveals = append(f.reveals, id)
	f.reasons = append(f.reasons, reason)
	return f.lost
}

func (f *fakeDecider) RevealStart(ctx context.Context, id int64, field reconcile.Field, reason string, maxBytes int) (reconcile.Revealed, reconcile.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.src.mu.Lock()
	defer f.src.mu.Unlock()
	if err := f.revealCall("reveal", id, reason); err != nil {
		return reconcile.Revealed{}, reconcile.Result{}, err
	}
	r := f.record(id)
	if r == nil {
		res, err := f.answer(nil, "not_found", "no such operation")
		return reconcile.Revealed{}, res, err
	}
	value := f.values[field]
	switch {
	case value != nil:
	case field == reconcile.FieldIntent:
		value = []byte(`{"intent":{"template":"tmpl-7731","to":"user-8812@example.com"},"tool":"send-email","version":"1"}`)
	case r.State != readmodel.StateCompleted && r.State != readmodel.StateRejected:
		res, err := f.answer(r, "no_value", "the record has no stored result")
		return reconcile.Revealed{}, res, err
	default:
		value = []byte(`{"message_id":"msg_8f3a21","accepted":true,"to":"user-8812@example.com"}`)
	}
	res, err := f.answer(r, "", "")
	if f.slowReveal != nil {
		// A value slow to come: the audit has committed, the value has
		// not arrived until the operator gives up.
		f.mu.Unlock()
		f.src.mu.Unlock()
		close(f.slowReveal)
		<-ctx.Done()
		f.src.mu.Lock()
		f.mu.Lock()
		return reconcile.Revealed{}, res, ctx.Err()
	}
	out := reconcile.Revealed{Text: value, Size: int64(len(value))}
	if len(out.Text) > maxBytes {
		out.Text = out.Text[:maxBytes]
	}
	return out, res, err
}

// newDecideHarness drives a console that may write through dec (nil: no
// Decider at all), with the fake source's goldens' settings.
func newDecideHarness(t testing.TB, src *fakeSource, dec Decider, opts Config, w, h int) *harness {
	t.Helper()
	opts.Context, opts.NoColor, opts.Decider = "prod-eu", true, dec
	hs := startHarness(&harness{t: t, src: src}, src, opts, w, h, termenv.Ascii)
	hs.m.reconcile().now = func() time.Time { return dbNow.Add(2 * time.Second) }
	return hs
}

func (f *fakeDecider) RevealConflict(_ context.Context, conflictID int64, reason string) (reconcile.ConflictReveal, reconcile.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.src.mu.Lock()
	defer f.src.mu.Unlock()
	if err := f.revealCall("reveal-conflict", conflictID, reason); err != nil {
		return reconcile.ConflictReveal{}, reconcile.Result{}, err
	}
	out := reconcile.ConflictReveal{ConflictID: conflictID}
	var r *readmodel.Row
	for id, cs := range f.src.conflicts {
		if slices.ContainsFunc(cs, func(c readmodel.Conflict) bool { return c.ID == conflictID }) {
			r = f.record(id)
		}
	}
	req, ok := f.requests[conflictID]
	switch {
	case r == nil:
		res, err := f.answer(nil, "not_found", fmt.Sprintf("no conflict %d (or not visible to alice)", conflictID))
		return out, res, err
	case f.refuseConflict != "":
		res, err := f.answer(r, "not_permitted", f.refuseConflict)
		return out, res, err
	case !ok || req[0] == nil && req[1] == nil:
		res, err := f.answer(r, "no_value", fmt.Sprintf("neither request of conflict %d was recorded: nothing to reveal", conflictID))
		return out, res, err
	}
	res, err := f.answer(r, "", "")
	// As desk.RevealConflict computes them.
	out.Original = reconcile.ConflictSide{Request: req[0], Fingerprinted: true}
	out.Attempted = reconcile.ConflictSide{Request: req[1], Fingerprinted: true}
	if req[1] == nil {
		out.Attempted.Fingerprinted = false
		out.Attempted.NotRecorded = fmt.Sprintf("not recorded: conflict %d predates migration 00019 (schema version 19), "+
			"before which opsdesk kept only the fingerprint of a conflicting request", conflictID)
	}
	out.Compare()
	return out, res, err
}
