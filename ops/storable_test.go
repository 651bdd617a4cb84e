package ops_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
)

// nulIntents hold U+0000 where jsonb cannot take it: in a value, in a key,
// deep down, and as a raw escape.
var nulIntents = map[string]any{
	"InValue":     ticketIntent{Title: "Printer\x00on fire", Priority: 2},
	"InKey":       map[string]int{"prio\x00rity": 2},
	"Nested":      map[string]any{"a": []any{1, map[string]string{"b": "\x00"}}},
	"RawEscape":   json.RawMessage(`{"title":"\u0000"}`),
	"RawKey":      json.RawMessage(`{"\u0000":1}`),
	"OnlyNUL":     "\x00",
	"UpperEscape": json.RawMessage(`["\u0000"]`),
}

func TestIntentTheStoreCannotHoldIsRefusedFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newProvider()
	for name, intent := range nulIntents {
		t.Run(name, func(t *testing.T) {
			ran := false
			_, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "k-nul-"+name, intent),
				func(context.Context, pgx.Tx) (ticketResult, error) {
					ran = true
					return ticketResult{}, nil
				})
			requireInvalid(t, err, "intent", "U+0000")
			require.False(t, ran, "fn ran")

			_, err = ops.DoExternal(b.ctx, b.store, externalReq(toolCharge, "k-nul-"+name, intent), p.send)
			requireInvalid(t, err, "intent", "U+0000")
		})
	}
	// An escaped backslash before "u0000" is text, not U+0000.
	_, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "k-backslash", ticketIntent{Title: `C:\u0000`, Priority: 2}),
		createTicket("acme", "k-backslash", "x"))
	require.NoError(t, err)

	require.Empty(t, p.calls, "the provider was called")
	require.Equal(t, 1, b.tickets(t))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations`))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM opsdesk.conflicts`))
}

func TestIntentSizeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newProvider()
	// An intent whose canonical form, {"intent":{"priority":2,"title":"…"},"tool":…,"version":"1"},
	// is n bytes.
	title := func(tool string, n int) ticketIntent {
		envelope := len(`{"intent":{"priority":2,"title":""},"tool":"` + tool + `","version":"1"}`)
		return ticketIntent{Title: strings.Repeat("p", n-envelope), Priority: 2}
	}

	t.Run("DefaultIs256KiB", func(t *testing.T) {
		require.Equal(t, 256<<10, ops.DefaultMaxIntentBytes)
		_, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "k-at-limit", title(toolTicket, 256<<10)), createTicket("acme", "k", "x"))
		require.NoError(t, err, "an intent of exactly the limit is taken")

		_, err = ops.DoTx(b.ctx, b.store, ticketReq("acme", "k-over", title(toolTicket, 256<<10+1)), createTicket("acme", "k", "x"))
		requireInvalid(t, err, "intent", "is 262145 bytes in canonical form, over the limit of 262144 in canonical form (Config.MaxIntentBytes)")
		_, err = ops.DoExternal(b.ctx, b.store, externalReq(toolCharge, "k-over", title(toolCharge, 256<<10+1)), p.send)
		requireInvalid(t, err, "intent", "is 262145 bytes in canonical form")
	})

	t.Run("Hostile32MiB", func(t *testing.T) {
		// Refused once encoded, before it is canonicalized.
		_, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "k-32", title(toolTicket, 32<<20)), createTicket("acme", "k", "x"))
		requireInvalid(t, err, "intent", "is 33554432 bytes as JSON, over the limit of 262144 in canonical form")
		_, err = ops.DoExternal(b.ctx, b.store, externalReq(toolCharge, "k-32", title(toolCharge, 32<<20)), p.send)
		requireInvalid(t, err, "intent", "bytes as JSON")
	})

	t.Run("CanonicalSizeCounts", func(t *testing.T) {
		small := newStore(t, b.db.Service, ops.Config{Owner: "w-small", MaxIntentBytes: 200})
		_, err := ops.DoTx(b.ctx, small, ticketReq("acme", "k-small", title(toolTicket, 201)), createTicket("acme", "k", "x"))
		requireInvalid(t, err, "intent", "is 201 bytes in canonical form, over the limit of 200")
		_, err = ops.DoTx(b.ctx, small, ticketReq("acme", "k-small", title(toolTicket, 200)), createTicket("acme", "k", "x"))
		require.NoError(t, err)

		// Escapes canonicalize shorter: 600 bytes as sent, 150 canonical.
		escaped := json.RawMessage(`{"t":"` + strings.Repeat(`\u0070`, 100) + `"}`)
		_, err = ops.DoTx(b.ctx, small, ticketReq("acme", "k-escaped", escaped), createTicket("acme", "k", "x"))
		require.NoError(t, err)
		// Numbers longer: 4 characters as sent, 16 canonical.
		numbers := json.RawMessage(`[` + strings.Repeat(`1e15,`, 15) + `1]`)
		_, err = ops.DoTx(b.ctx, small, ticketReq("acme", "k-numbers", numbers), createTicket("acme", "k", "x"))
		requireInvalid(t, err, "intent", "in canonical form, over the limit of 200")
	})

	require.Empty(t, p.calls)
	require.Equal(t, 3, b.tickets(t))
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM opsdesk.operations`))
}

func TestSizeLimitsAreValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, cfg := range map[string]ops.Config{
		"negative intent limit":     {MaxIntentBytes: -1},
		"negative result limit":     {MaxResultBytes: -1},
		"result limit over jsonb's": {MaxResultBytes: 1 << 28},
	} {
		cfg.Tools = testTools
		_, err := ops.New(b.db.Service, cfg)
		require.Error(t, err, name)
		require.ErrorContains(t, err, "Config.Max", name)
	}
	store, err := ops.New(b.db.Service, ops.Config{Tools: testTools, MaxIntentBytes: 1, MaxResultBytes: 1<<28 - 1})
	require.NoError(t, err)
	require.Equal(t, 1, store.MaxIntentBytes())
	require.Equal(t, 1<<28-1, store.MaxResultBytes())
	// Zero is the default, and the store says which.
	store, err = ops.New(b.db.Service, ops.Config{Tools: testTools})
	require.NoError(t, err)
	require.Equal(t, ops.DefaultMaxIntentBytes, store.MaxIntentBytes())
	require.Equal(t, ops.DefaultMaxResultBytes, store.MaxResultBytes())
}

// blob is a result with a reference and free-form data.
type blob struct {
	Ref  string `json:"ref"`
	Data string `json:"data"`
}

func (b blob) ResultRef() string { return b.Ref }

// unencodable is a result with a reference that encoding/json refuses.
type unencodable struct {
	Ref   string `json:"ref"`
	Later func() `json:"later"`
}

func (u unencodable) ResultRef() string { return u.Ref }

// hiddenRef is a result whose reference is not part of its JSON.
type hiddenRef struct {
	ID  int `json:"id"`
	ref string
}

func (h hiddenRef) ResultRef() string { return h.ref }

// unstorable are results the store cannot hold as they are, and what the
// refusal says.
var unstorable = []struct {
	name   string
	result any
	says   string
}{
	{"RawNotUTF8", json.RawMessage("{\"data\":\"\xff\"}"), "not valid UTF-8"},
	{"OverTheLimit", blob{Ref: "R-2", Data: strings.Repeat("x", 2048)}, "over the limit of 1024 (Config.MaxResultBytes)"},
	{"NotEncodable", unencodable{Ref: "R-4", Later: func() {}}, "cannot be encoded as JSON"},
	// A result that would read back as the marker of one not stored.
	{"MarkerShaped", map[string]string{"opsdesk": "result not stor\u0065d"}, "shape opsdesk keeps"},
	{"MarkerShapedEscaped", json.RawMessage(`{"opsdesk":"result not stor\u0065d","x":1}`), "shape opsdesk keeps"},
}

func TestDoTxRefusesResultItCannotStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := newStore(t, b.db.Service, ops.Config{Owner: "w-tx", MaxResultBytes: 1024})
	for _, tc := range unstorable {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-" + tc.name
			var runs atomic.Int32
			fn := func(ctx context.Context, tx pgx.Tx) (any, error) {
				runs.Add(1)
				_, err := createTicket("acme", key, "written by fn")(ctx, tx)
				return tc.result, err
			}
			for range 2 {
				_, err := ops.DoTx(b.ctx, store, ticketReq("acme", key, printer), fn)
				requireInvalid(t, err, "result", tc.says)
				require.ErrorContains(t, err, "nothing was committed")
			}
			require.EqualValues(t, 2, runs.Load(), "a retry runs fn again: nothing committed")

			// A rejection payload the same way.
			_, err := ops.DoTx(b.ctx, store, ticketReq("acme", key, printer), func(ctx context.Context, tx pgx.Tx) (any, error) {
				_, err := createTicket("acme", key, "written by fn")(ctx, tx)
				require.NoError(t, err)
				return nil, ops.Reject(tc.result)
			})
			requireInvalid(t, err, "rejection", tc.says)
		})
	}
	t.Run("ReferenceNotStorable", func(t *testing.T) {
		for ref, says := range map[string]string{"R\x00": "U+0000", strings.Repeat("r", 501): "the limit is 500", "\xff": "UTF-8"} {
			_, err := ops.DoTx(b.ctx, store, ticketReq("acme", "k-ref", printer), func(context.Context, pgx.Tx) (hiddenRef, error) {
				return hiddenRef{ID: 1, ref: ref}, nil
			})
			requireInvalid(t, err, "result_ref", says)
		}
	})
	t.Run("Hostile32MiB", func(t *testing.T) {
		_, err := ops.DoTx(b.ctx, store, ticketReq("acme", "k-32", printer), func(context.Context, pgx.Tx) (blob, error) {
			return blob{Data: strings.Repeat("x", 32<<20)}, nil
		})
		requireInvalid(t, err, "result", "is 33554452 bytes, over the limit of 1024")
	})
	require.Equal(t, 0, b.tickets(t), "fn's writes committed")
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM opsdesk.operations`))

	// The default limit is 1 MiB.
	require.Equal(t, 1<<20, ops.DefaultMaxResultBytes)
	_, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", "k-default", printer), func(context.Context, pgx.Tx) (blob, error) {
		return blob{Data: strings.Repeat("x", 1<<20)}, nil
	})
	requireInvalid(t, err, "result", "over the limit of 1048576")
}

func TestDoExternalStoresAMarkerForAResultItCannotStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := newStore(t, b.db.Service, ops.Config{Owner: "w-ext", MaxResultBytes: 1024})
	for _, tc := range unstorable {
		t.Run(tc.name, func(t *testing.T) {
			for _, tool := range []string{toolEmail, toolCharge} {
				key := "k-" + tc.name
				var calls atomic.Int32
				send := func(context.Context, ops.Attempt) (any, error) {
					calls.Add(1)
					return tc.result, nil
				}
				req := externalReq(tool, key, invoice)
				out, err := ops.DoExternal(b.ctx, store, req, send)
				require.NoError(t, err, "the provider acted: the call succeeds")
				require.Equal(t, ops.Created, out.Disposition)
				js, encErr := json.Marshal(tc.result)
				if encErr == nil {
					require.Equal(t, tc.result, out.Result, "the caller gets the real result")
				} else { // funcs do not compare
					require.Equal(t, tc.result.(unencodable).Ref, out.Result.(unencodable).Ref, "the caller gets the real result")
				}
				require.NotNil(t, out.NotStored, "the caller is told it was not stored")
				require.Contains(t, out.NotStored.Reason, tc.says)
				wantRef := ""
				if r, ok := tc.result.(ops.ResultReferencer); ok {
					wantRef = r.ResultRef()
				}
				require.Equal(t, wantRef, out.ResultRef)
				if encErr == nil {
					sum := sha256.Sum256(js)
					require.Equal(t, len(js), out.NotStored.Bytes)
					require.Equal(t, hex.EncodeToString(sum[:]), out.NotStored.SHA256)
				}

				// The record completed with the marker and the reference.
				rec := b.lookup(t, tool, "acme", key)
				require.Equal(t, ops.StateCompleted, rec.State)
				require.Equal(t, ops.OutcomeSucceeded, rec.Outcome)
				require.Equal(t, wantRef, rec.ResultRef)
				var tag, reason string
				require.NoError(t, b.db.Admin.QueryRow(b.ctx, `SELECT result->>'opsdesk', result->>'reason' FROM opsdesk.operations
WHERE tenant = 'acme' AND tool = $1 AND key = $2`, tool, key).Scan(&tag, &reason))
				require.Equal(t, "result not stored", tag)
				require.Equal(t, out.NotStored.Reason, reason)

				// A retry replays the marker as ErrResultNotStored, and
				// never calls the provider again.
				again, err := ops.DoExternal(b.ctx, store, req, send)
				require.ErrorIs(t, err, ops.ErrResultNotStored)
				var notStored *ops.ResultNotStoredError
				require.ErrorAs(t, err, &notStored)
				require.Equal(t, out.OperationID, notStored.OperationID)
				require.Equal(t, wantRef, notStored.ResultRef)
				require.Equal(t, *out.NotStored, notStored.ResultNotStored)
				require.Equal(t, ops.Replayed, again.Disposition)
				require.Equal(t, out.OperationID, again.OperationID)
				require.Equal(t, wantRef, again.ResultRef)
				require.Nil(t, again.Result, "no result is made up")
				require.EqualValues(t, 1, calls.Load(), "%s: the provider was called again", tool)
			}
		})
	}
}

func TestDoExternalStoresAMarkerForAHostile32MiBResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	huge := blob{Ref: "R-32", Data: strings.Repeat("x", 32<<20)}
	out, err := ops.DoExternal(b.ctx, b.store, chargeReq("k-32"), func(context.Context, ops.Attempt) (blob, error) { return huge, nil })
	require.NoError(t, err)
	require.Equal(t, huge, out.Result)
	require.Equal(t, "is 33554456 bytes, over the limit of 1048576 (Config.MaxResultBytes)", out.NotStored.Reason)
	require.Less(t, b.count(t, `SELECT octet_length(result::text) FROM opsdesk.operations WHERE key = 'k-32'`), 300)
	_, err = ops.DoExternal(b.ctx, b.store, chargeReq("k-32"), neverCalled[blob](t))
	require.ErrorIs(t, err, ops.ErrResultNotStored)
	require.ErrorContains(t, err, `its reference is "R-32"`)
}

func TestDoExternalStoresAMarkerForARejectionItCannotStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	payload := map[string]string{"reason": "card declined", "log": strings.Repeat("x", 1<<20)}
	var calls atomic.Int32
	decline := func(context.Context, ops.Attempt) (receipt, error) {
		calls.Add(1)
		return receipt{}, ops.Reject(payload)
	}
	req := chargeReq("k-decline")
	_, err := ops.DoExternal(b.ctx, b.store, req, decline)
	var rej *ops.RejectedError
	require.ErrorAs(t, err, &rej)
	require.False(t, rej.Replayed)
	require.NotNil(t, rej.NotStored)
	require.Contains(t, rej.NotStored.Reason, "over the limit")
	var got map[string]string
	require.NoError(t, rej.Decode(&got))
	require.Equal(t, payload, got, "the attempt that ran has the real payload")

	_, err = ops.DoExternal(b.ctx, b.store, req, decline)
	require.ErrorAs(t, err, &rej)
	require.True(t, rej.Replayed)
	require.NotNil(t, rej.NotStored)
	require.Contains(t, string(rej.Payload), "result not stored")
	require.EqualValues(t, 1, calls.Load())
	rec := b.lookup(t, toolCharge, "acme", "k-decline")
	require.Equal(t, ops.OutcomeRejected, rec.Outcome)
}

func TestDoExternalLeavesOutAReferenceItCannotStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := chargeReq("k-bad-ref")
	want := blob{Ref: strings.Repeat("r", 501), Data: "charged"}
	out, err := ops.DoExternal(b.ctx, b.store, req, func(context.Context, ops.Attempt) (blob, error) { return want, nil })
	require.NoError(t, err)
	require.Nil(t, out.NotStored, "the result itself was stored")
	require.Empty(t, out.ResultRef)
	require.Empty(t, b.lookup(t, toolCharge, "acme", "k-bad-ref").ResultRef)

	again, err := ops.DoExternal(b.ctx, b.store, req, neverCalled[blob](t))
	require.NoError(t, err)
	require.Equal(t, ops.Replayed, again.Disposition)
	require.Equal(t, want, again.Result, "the stored result still carries the reference")
}

// requireInvalid checks err is an *InvalidRequestError about field whose
// message says says.
func requireInvalid(t *testing.T, err error, field, says string) {
	t.Helper()
	require.ErrorIs(t, err, ops.ErrInvalidRequest)
	var invalid *ops.InvalidRequestError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, field, invalid.Field)
	require.ErrorContains(t, err, says)
}

func TestLogsSayAResultWasNotStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var buf strings.Builder
	store := newStore(t, b.db.Service, ops.Config{Owner: "w-log", Logger: newJSONLogger(&buf), MaxResultBytes: 64})
	send := func(context.Context, ops.Attempt) (blob, error) {
		return blob{Ref: "R-9", Data: "secret " + strings.Repeat("x", 100)}, nil
	}
	_, err := ops.DoExternal(b.ctx, store, chargeReq("k-log"), send)
	require.NoError(t, err)
	_, err = ops.DoExternal(b.ctx, store, chargeReq("k-log"), send)
	require.ErrorIs(t, err, ops.ErrResultNotStored)
	logs := buf.String()
	require.Contains(t, logs, `"level":"WARN","msg":"opsdesk operation"`)
	require.Contains(t, logs, `"disposition":"created_not_stored"`)
	require.Contains(t, logs, `"disposition":"replayed_not_stored"`)
	require.NotContains(t, logs, "secret")
}

// exactJSON is JSON that a parsed store (jsonb) would not give back as it
// was written: key order, duplicate keys, number spellings and escapes.
var exactJSON = []string{
	`{"reason":"over quota","limit":3}`,
	`{"n":1e200000,"m":1.50,"k":-0.0}`,
	`{"dup":1,"dup":2}`,
	`{"s":"\u00e9\ud800","t":"\/"}`,
	`[{"z":null,"a":true}]`,
	// What jsonb could not hold at all.
	`{"a":"\u0000","\u0000":1}`,
	`{"data":"\ud800x","low":"\ude00"}`,
}

// Results and rejection payloads are replayed exactly as the first call
// marshalled them (migration 00018 stores them as json, not jsonb),
// including U+0000 and lone surrogates, which jsonb refused.
func TestReplaysAreByteForByte(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, raw := range exactJSON {
		want, err := json.Marshal(json.RawMessage(raw))
		require.NoError(t, err)
		local := func(context.Context, pgx.Tx) (json.RawMessage, error) { return json.RawMessage(raw), nil }
		reject := func(context.Context, pgx.Tx) (json.RawMessage, error) { return nil, ops.Reject(json.RawMessage(raw)) }
		external := func(context.Context, ops.Attempt) (json.RawMessage, error) { return json.RawMessage(raw), nil }
		for try, disposition := range []ops.Disposition{ops.Created, ops.Replayed} {
			out, err := ops.DoTx(b.ctx, b.store, ticketReq("acme", fmt.Sprintf("ok-%d", i), printer), local)
			require.NoError(t, err)
			require.Equal(t, disposition, out.Disposition)
			require.Equal(t, string(want), string(out.Result), "DoTx, call %d", try+1)

			_, err = ops.DoTx(b.ctx, b.store, ticketReq("acme", fmt.Sprintf("no-%d", i), printer), reject)
			var rej *ops.RejectedError
			require.ErrorAs(t, err, &rej)
			require.Equal(t, string(want), string(rej.Payload), "Reject, call %d", try+1)

			ext, err := ops.DoExternal(b.ctx, b.store, externalReq(toolEmail, fmt.Sprintf("ext-%d", i), diskFull), external)
			require.NoError(t, err)
			require.Nil(t, ext.NotStored)
			require.Equal(t, disposition, ext.Disposition)
			require.Equal(t, string(want), string(ext.Result), "DoExternal, call %d", try+1)
		}
	}
}
