package ops_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
)

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)

	cases := []struct {
		name  string
		req   ops.Request
		field string
	}{
		{"EmptyKey", ticketReq("acme", "", printer), "key"},
		{"KeyTooLong", ticketReq("acme", strings.Repeat("k", ops.MaxKeyBytes+1), printer), "key"},
		{"KeyNotUTF8", ticketReq("acme", "run-\xff", printer), "key"},
		{"KeyWithControlCharacter", ticketReq("acme", "run\n42", printer), "key"},
		{"EmptyTenant", ticketReq("", "k1", printer), "tenant"},
		{"EmptyVersion", ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: toolTicket, Key: "k1"}, Intent: printer}, "version"},
		{"UnencodableIntent", ticketReq("acme", "k1", map[string]any{"f": func() {}}), "intent"},
		{"NumberBeyondDoublePrecision", ticketReq("acme", "k1", map[string]int64{"amount": 1<<53 + 1}), "intent"},
		{"InvalidRawIntent", ticketReq("acme", "k1", json.RawMessage(`{"title":`)), "intent"},
		{"DuplicateFieldInRawIntent", ticketReq("acme", "k1", json.RawMessage(`{"title":"a","title":"b"}`)), "intent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ops.DoTx(b.ctx, b.store, tc.req, createTicket("acme", "k1", "x"))
			require.ErrorIs(t, err, ops.ErrInvalidRequest)
			var invalid *ops.InvalidRequestError
			require.ErrorAs(t, err, &invalid)
			require.Equal(t, tc.field, invalid.Field)
			require.Contains(t, err.Error(), tc.field)
		})
	}

	t.Run("UnknownFieldsAndInvalidIntents", func(t *testing.T) {
		for raw, problem := range map[string]string{
			`{"title":"Printer on fire","priority":2,"urgent":true}`: `unknown field "urgent"`,
			`{"title":"","priority":2}`:                              "title is required",
			`{"title":"Printer on fire","priority":9}`:               "priority 9 is not between 1 and 5",
			`{"title":"Printer on fire","priority":"high"}`:          `field "priority": expected int, got JSON string`,
			`{"title":"Printer on fire","priority":2} {}`:            "unexpected data after the JSON value",
			``: "empty JSON",
		} {
			_, err := ops.DecodeIntent[ticketIntent]([]byte(raw))
			require.ErrorIs(t, err, ops.ErrInvalidRequest, raw)
			require.ErrorContains(t, err, problem, raw)
		}
	})

	t.Run("UnknownTool", func(t *testing.T) {
		req := ticketReq("acme", "k1", printer)
		req.Tool = "launch-rocket"
		_, err := ops.DoTx(b.ctx, b.store, req, createTicket("acme", "k1", "x"))
		require.ErrorIs(t, err, ops.ErrUnknownTool)
		require.ErrorContains(t, err, "launch-rocket")
	})

	require.Equal(t, 0, b.tickets(t))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM opsdesk.operations`))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM opsdesk.conflicts`))
}

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	// A socket directory where no server listens. The pool is created
	// lazily, so the failure surfaces in the call, as it would when the
	// database goes away under a running service.
	cfg, err := pgxpool.ParseConfig("host=" + t.TempDir() + " user=nobody dbname=nothing connect_timeout=2")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer pool.Close()
	// New records the tools' policies; an unreachable store does not stop
	// the service from starting, and the policies may be recorded later.
	store, err := ops.New(pool, ops.Config{Tools: testTools})
	require.NoError(t, err)
	require.ErrorIs(t, store.RecordPolicies(t.Context()), ops.ErrUnavailable)

	_, err = ops.DoTx(t.Context(), store, ticketReq("acme", "k1", printer), createTicket("acme", "k1", "x"))
	require.ErrorIs(t, err, ops.ErrUnavailable)
	var unavailable *ops.UnavailableError
	require.ErrorAs(t, err, &unavailable)

	_, err = ops.DoExternal(t.Context(), store, ops.Request{Identity: ops.Identity{Tenant: "acme", Tool: toolEmail, Key: "k1"}, Version: "1", Intent: printer},
		func(context.Context, ops.Attempt) (string, error) {
			t.Fatal("the provider must not be called when nothing could be reserved")
			return "", nil
		})
	require.ErrorIs(t, err, ops.ErrUnavailable)

	_, err = store.Read(t.Context(), ops.Identity{Tenant: "acme", Tool: toolTicket, Key: "k1"})
	require.ErrorIs(t, err, ops.ErrUnavailable)
}

func TestStoreConfigErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, cfg := range map[string]ops.Config{
		"no effect":          {Tools: map[string]ops.Policy{"t": {}}},
		"lease too short":    {Tools: map[string]ops.Policy{"t": {Effect: ops.EffectLocal, Lease: 1}}},
		"negative retention": {Tools: map[string]ops.Policy{"t": {Effect: ops.EffectLocal, Retention: -1}}},
		"bad tool name":      {Tools: map[string]ops.Policy{"": {Effect: ops.EffectLocal}}},
	} {
		_, err := ops.New(b.db.Service, cfg)
		require.Error(t, err, name)
	}
}

func TestKeyOfMaxBytesIsAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := strings.Repeat("é", ops.MaxKeyBytes/2) + "k" // 255 bytes
	require.Len(t, key, ops.MaxKeyBytes)
	out, err := b.doTicket(t, "acme", key, printer)
	require.NoError(t, err)
	rec := b.lookup(t, toolTicket, "acme", key)
	require.Equal(t, out.OperationID, rec.ID)
}
