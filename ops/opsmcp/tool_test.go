package opsmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmcp"
	"github.com/opsdesk/opsdesk/ops/opstest"
)

type createTicket struct {
	Title    string `json:"title"`
	Priority int    `json:"priority,omitempty"`
}

type ticket struct {
	ID    int64  `json:"id"`
	Title string `json:"title"`
}

type charge struct {
	Cents int64 `json:"cents"`
}

type receipt struct {
	Charge string `json:"charge"`
}

// bundle is one test's store, MCP server and what its tools did.
type bundle struct {
	db      *opstest.DB
	server  *mcp.Server
	charges atomic.Int64 // the provider's effects
	// charging, when set, is what charge-card does after its effect.
	charging func(ctx context.Context) error
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{db: opstest.New(t, &opstest.Opts{Config: ops.Config{Tools: map[string]ops.Policy{
		"create-ticket": {Effect: ops.EffectLocal},
		"charge-card":   {Effect: ops.EffectUnknownOutcome, Lease: 300 * time.Millisecond},
		"send-note":     {Effect: ops.EffectLocal},
	}}})}
	_, err := b.db.Admin.Exec(t.Context(), `
CREATE TABLE tickets (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL, title text NOT NULL);
GRANT SELECT, INSERT ON tickets TO opsdesk_service;`)
	require.NoError(t, err)
	b.server = mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1"}, nil)
	opts := opsmcp.Config{Tenant: func(context.Context, *mcp.CallToolRequest) (string, error) { return "acme", nil }, Additive: true}
	create := func(ctx context.Context, _ *mcp.CallToolRequest, tx pgx.Tx, in createTicket) (ticket, error) {
		if in.Title == "forbidden" {
			return ticket{}, ops.Reject(map[string]string{"reason": "titles may not be forbidden"})
		}
		tk := ticket{Title: in.Title}
		err := tx.QueryRow(ctx, `INSERT INTO tickets (tenant, title) VALUES ('acme', $1) RETURNING id`, in.Title).Scan(&tk.ID)
		return tk, err
	}
	require.NoError(t, opsmcp.AddLocalTool(b.server, b.db.Store, &mcp.Tool{Name: "create-ticket", Description: "Creates a ticket."}, opts, create))
	optional := opts
	optional.KeyOptional = true
	require.NoError(t, opsmcp.AddLocalTool(b.server, b.db.Store, &mcp.Tool{Name: "send-note"}, optional, create))
	require.NoError(t, opsmcp.AddExternalTool(b.server, b.db.Store, &mcp.Tool{Name: "charge-card"}, opts,
		func(ctx context.Context, _ *mcp.CallToolRequest, a ops.Attempt, in charge) (receipt, error) {
			b.charges.Add(1)
			if b.charging != nil {
				if err := b.charging(ctx); err != nil {
					return receipt{}, err
				}
			}
			return receipt{Charge: "ch_" + a.ProviderKey()[:12]}, nil
		}))
	return b
}

// connect is a client session on b's server over the in-memory transport;
// wrap, when set, wraps the client's side of it.
func (b *bundle) connect(t *testing.T, wrap func(mcp.Transport) mcp.Transport) (*mcp.ClientSession, *mcp.ServerSession) {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := b.server.Connect(t.Context(), st, nil)
	require.NoError(t, err)
	var transport mcp.Transport = ct
	if wrap != nil {
		transport = wrap(ct)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(t.Context(), transport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	return cs, ss
}

func (b *bundle) client(t *testing.T) *mcp.ClientSession {
	cs, _ := b.connect(t, nil)
	return cs
}

// uncapped is a client session on b's server over pipes without the SDK's
// cap on a message's size.
func (b *bundle) uncapped(t *testing.T) *mcp.ClientSession {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	ss, err := b.server.Connect(t.Context(), &mcp.IOTransport{Reader: sr, Writer: sw, MaxLineLength: -1}, nil)
	require.NoError(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: cr, Writer: cw, MaxLineLength: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	require.NoError(t, err, "a tool call is answered with a result, never a protocol error")
	return res
}

func key(k string) mcp.Meta { return mcp.Meta{opsmcp.KeyMeta: k} }

// toolError is res's structured tool error, checked to be one.
func toolError(t *testing.T, res *mcp.CallToolResult, class string) opsmcp.ToolError {
	t.Helper()
	require.True(t, res.IsError, "want a tool error, got %+v", res)
	var te opsmcp.ToolError
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &te))
	require.Equal(t, class, te.Class, "%s", b)
	require.NotEmpty(t, res.Content)
	return te
}

func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Admin.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n))
	return n
}

func TestReplayIsExactAndMarked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs, _ := b.connect(t, nil)
	first := call(t, cs, "create-ticket", createTicket{Title: "Printer on fire"}, key("run-1/step-1"))
	again := call(t, cs, "create-ticket", map[string]any{"title": "Printer on fire"}, mcp.Meta{opsmcp.SEPKeyMeta: "run-1/step-1"})
	require.False(t, first.IsError)
	require.Equal(t, false, first.Meta[opsmcp.ReplayedMeta])
	require.Equal(t, true, again.Meta[opsmcp.ReplayedMeta])
	require.Equal(t, "run-1/step-1", again.Meta[opsmcp.KeyMeta])
	require.Equal(t, first.StructuredContent, again.StructuredContent)
	require.Equal(t, first.Content[0].(*mcp.TextContent).Text, again.Content[0].(*mcp.TextContent).Text)
	require.Equal(t, 1, b.count(t, "tickets"))
}

// dropFirstResponse loses the answer to the client's first tools/call, as
// a broken connection would after the server answered.
type dropFirstResponse struct {
	mcp.Transport
	dropped chan struct{}
}

func (d *dropFirstResponse) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := d.Transport.Connect(ctx)
	return &droppingConn{Connection: c, d: d}, err
}

type droppingConn struct {
	mcp.Connection
	d        *dropFirstResponse
	mu       sync.Mutex
	callID   *jsonrpc.ID
	dropOnce sync.Once
}

func (c *droppingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Request); ok && r.Method == "tools/call" {
		c.mu.Lock()
		if c.callID == nil {
			id := r.ID
			c.callID = &id
		}
		c.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *droppingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if r, ok := msg.(*jsonrpc.Response); ok {
			c.mu.Lock()
			first := c.callID != nil && r.ID == *c.callID
			c.mu.Unlock()
			dropped := false
			if first {
				c.dropOnce.Do(func() { dropped = true; close(c.d.dropped) })
			}
			if dropped {
				continue
			}
		}
		return msg, err
	}
}

func TestLostResponseRetriedRunsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lossy := func(tr mcp.Transport) mcp.Transport {
		return &dropFirstResponse{Transport: tr, dropped: make(chan struct{})}
	}
	var d *dropFirstResponse
	cs, _ := b.connect(t, func(tr mcp.Transport) mcp.Transport { d = lossy(tr).(*dropFirstResponse); return d })

	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-d.dropped; cancel() }() // the orchestrator's timeout
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create-ticket", Arguments: createTicket{Title: "Printer on fire"}, Meta: key("run-2/step-1")})
	require.Error(t, err, "the first answer was lost")

	retry := call(t, cs, "create-ticket", createTicket{Title: "Printer on fire"}, key("run-2/step-1"))
	require.False(t, retry.IsError, "%+v", retry)
	require.Equal(t, true, retry.Meta[opsmcp.ReplayedMeta])
	require.Equal(t, 1, b.count(t, "tickets"))
}

func TestConcurrentIdenticalCallsRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs, _ := b.connect(t, nil)
	var wg sync.WaitGroup
	var created atomic.Int64
	results := make([]*mcp.CallToolResult, 16)
	for i := range results {
		wg.Go(func() {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "create-ticket", Arguments: createTicket{Title: "Printer on fire"}, Meta: key("run-3/step-1")})
			if err == nil && !res.IsError && res.Meta[opsmcp.ReplayedMeta] == false {
				created.Add(1)
			}
			results[i] = res
		})
	}
	wg.Wait()
	for _, res := range results {
		require.False(t, res.IsError, "%+v", res)
		require.Equal(t, results[0].StructuredContent, res.StructuredContent)
	}
	require.EqualValues(t, 1, created.Load())
	require.Equal(t, 1, b.count(t, "tickets"))
}

func TestChangedArgumentsAreAConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs, _ := b.connect(t, nil)
	require.False(t, call(t, cs, "create-ticket", createTicket{Title: "Printer on fire"}, key("run-4/step-1")).IsError)
	te := toolError(t, call(t, cs, "create-ticket", createTicket{Title: "Printer on fire", Priority: 1}, key("run-4/step-1")), opsmcp.ClassConflict)
	require.False(t, te.RetryWithSameKey)
	require.NotZero(t, te.OperationID)
	require.Equal(t, 1, b.count(t, "tickets"))
	require.Equal(t, 1, b.count(t, "opsdesk.conflicts"))
}

func TestBusinessRejectionIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs, _ := b.connect(t, nil)
	for range 2 {
		te := toolError(t, call(t, cs, "create-ticket", createTicket{Title: "forbidden"}, key("run-5/step-1")), opsmcp.ClassRejected)
		require.False(t, te.RetryWithSameKey)
		require.JSONEq(t, `{"reason": "titles may not be forbidden"}`, string(te.Rejection))
	}
	require.Equal(t, 1, b.count(t, "opsdesk.operations"))
}

func TestMissingKeyIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs, _ := b.connect(t, nil)
	te := toolError(t, call(t, cs, "create-ticket", createTicket{Title: "Printer on fire"}, nil), opsmcp.ClassKeyMissing)
	require.False(t, te.RetryWithSameKey)
	require.Contains(t, te.Message, opsmcp.KeyMeta)
	require.Zero(t, b.count(t, "opsdesk.operations"))
	require.Zero(t, b.count(t, "tickets"))

	// A tool that opted out runs under a key of its own, which it names.
	res := call(t, cs, "send-note", createTicket{Title: "hello"}, nil)
	require.False(t, res.IsError, "%+v", res)
	generated, _ := res.Meta[opsmcp.KeyMeta].(string)
	require.True(t, strings.HasPrefix(generated, "unkeyed-"), "%v", res.Meta)
	again := call(t, cs, "send-note", createTicket{Title: "hello"}, key(generated))
	require.Equal(t, true, again.Meta[opsmcp.ReplayedMeta])
}

func TestHostileInputsWriteNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs, _ := b.connect(t, nil)
	for name, meta := range map[string]mcp.Meta{
		"NUL":              key("run\x00-6"),
		"Control":          key("run-6\n"),
		"Escape":           key("run-6\x1b[2J"),
		"WhiteSpace":       key(" \t "),
		"Empty":            key(""),
		"Number":           {opsmcp.KeyMeta: 42},
		"Object":           {opsmcp.KeyMeta: map[string]any{"key": "run-6"}},
		"Null":             {opsmcp.KeyMeta: nil},
		"SEPNumber":        {opsmcp.SEPKeyMeta: 7},
		"TwoDifferentKeys": {opsmcp.KeyMeta: "run-6/a", opsmcp.SEPKeyMeta: "run-6/b"},
	} {
		t.Run(name, func(t *testing.T) {
			te := toolError(t, call(t, cs, "create-ticket", createTicket{Title: "Printer on fire"}, meta), opsmcp.ClassKeyInvalid)
			require.False(t, te.RetryWithSameKey)
			require.Less(t, len(te.Message), 500, "the answer does not echo the key")
		})
	}
	t.Run("Huge", func(t *testing.T) {
		// The SDK's transports drop a frame over 16 MiB
		// (mcp.DefaultMaxLineLength) with its connection; a server that
		// lifts the cap still refuses the key.
		huge := key(strings.Repeat("k", 32<<20))
		_, err := b.client(t).CallTool(t.Context(), &mcp.CallToolParams{Name: "create-ticket", Arguments: createTicket{Title: "x"}, Meta: huge})
		require.Error(t, err)
		te := toolError(t, call(t, b.uncapped(t), "create-ticket", createTicket{Title: "x"}, huge), opsmcp.ClassKeyInvalid)
		require.Less(t, len(te.Message), 500, "the answer does not echo the key")
	})
	t.Run("UnknownField", func(t *testing.T) {
		res := call(t, cs, "create-ticket", map[string]any{"title": "Printer on fire", "amount": 1e6}, key("run-6"))
		require.True(t, res.IsError, "%+v", res)
	})
	t.Run("UnknownFieldInAnotherCase", func(t *testing.T) {
		res := call(t, cs, "create-ticket", map[string]any{"title": "Printer on fire", "Title": "x"}, key("run-6"))
		require.True(t, res.IsError, "%+v", res)
	})
	require.Zero(t, b.count(t, "opsdesk.operations"))
	require.Zero(t, b.count(t, "opsdesk.conflicts"))
	require.Zero(t, b.count(t, "tickets"))
}

func TestKilledConnectionLeavesRecordForReconciliation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started, returned := make(chan struct{}), make(chan error, 1)
	b.charging = func(ctx context.Context) error {
		close(started)
		<-ctx.Done() // the provider's answer never comes
		returned <- context.Cause(ctx)
		return context.Cause(ctx)
	}
	k := &killable{}
	cs, _ := b.connect(t, func(tr mcp.Transport) mcp.Transport { k.Transport = tr; return k })
	go func() {
		_, _ = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "charge-card", Arguments: charge{Cents: 500}, Meta: key("run-7/step-1")})
	}()
	<-started

	// Another connection retrying meanwhile is told when to come back.
	other, _ := b.connect(t, nil)
	te := toolError(t, call(t, other, "charge-card", charge{Cents: 500}, key("run-7/step-1")), opsmcp.ClassInProgress)
	require.True(t, te.RetryWithSameKey)
	require.Greater(t, te.RetryAfterSeconds, 0.0)

	require.NoError(t, k.conn.Close()) // the connection dies with the call in flight
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool's context was not cancelled when its connection closed")
	}
	// Nobody handles the record any more: it is stuck at once (or when its
	// lease runs out), pending, not guessed either way.
	require.Eventually(t, func() bool {
		rec, err := b.db.Store.Read(t.Context(), ops.Identity{Tenant: "acme", Tool: "charge-card", Key: "run-7/step-1"})
		return err == nil && rec.Stuck()
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, ops.StatePending, b.lookup(t, "run-7/step-1").State)

	te = toolError(t, call(t, other, "charge-card", charge{Cents: 500}, key("run-7/step-1")), opsmcp.ClassNeedsReconciliation)
	require.False(t, te.RetryWithSameKey)
	require.True(t, te.NeedsPerson)
	require.EqualValues(t, 1, b.charges.Load())
}

// killable is a transport whose connection a test can cut.
type killable struct {
	mcp.Transport
	conn mcp.Connection
}

func (k *killable) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := k.Transport.Connect(ctx)
	k.conn = c
	return c, err
}

func TestLeaseExpiredAfterExternalWriteIsNeverRepeated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.charging = func(ctx context.Context) error {
		// The charge is made; the process stalls past its lease before
		// it can say so.
		_, err := b.db.Admin.Exec(context.WithoutCancel(ctx),
			`UPDATE opsdesk.operations SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE key = 'run-8/step-1'`)
		if err != nil {
			return err
		}
		<-ctx.Done()
		return context.Cause(ctx)
	}
	cs, _ := b.connect(t, nil)
	te := toolError(t, call(t, cs, "charge-card", charge{Cents: 500}, key("run-8/step-1")), opsmcp.ClassOutcomeUnknown)
	require.True(t, te.NeedsPerson)
	require.False(t, te.RetryWithSameKey)

	b.charging = nil
	te = toolError(t, call(t, cs, "charge-card", charge{Cents: 500}, key("run-8/step-1")), opsmcp.ClassNeedsReconciliation)
	require.True(t, te.NeedsPerson)
	require.EqualValues(t, 1, b.charges.Load(), "the charge ran once")
	require.Equal(t, ops.StatePending, b.lookup(t, "run-8/step-1").State)
}

func TestExternalToolReplays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs, _ := b.connect(t, nil)
	first := call(t, cs, "charge-card", charge{Cents: 500}, key("run-9/step-1"))
	again := call(t, cs, "charge-card", charge{Cents: 500}, key("run-9/step-1"))
	require.False(t, first.IsError, "%+v", first)
	require.Equal(t, first.StructuredContent, again.StructuredContent)
	require.Equal(t, true, again.Meta[opsmcp.ReplayedMeta])
	require.EqualValues(t, 1, b.charges.Load())
}

func TestAnnotationsAgreeWithPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cs, _ := b.connect(t, nil)
	tools := map[string]*mcp.ToolAnnotations{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		require.NoError(t, err)
		tools[tool.Name] = tool.Annotations
	}
	for name, want := range map[string]struct{ idempotent, openWorld bool }{
		"create-ticket": {true, false}, "charge-card": {true, true}, "send-note": {false, false},
	} {
		a := tools[name]
		require.NotNil(t, a, name)
		require.False(t, a.ReadOnlyHint, name)
		require.Equal(t, want.idempotent, a.IdempotentHint, name)
		require.Equal(t, want.openWorld, *a.OpenWorldHint, name)
		require.False(t, *a.DestructiveHint, name)
	}
}

func TestMisconfiguredToolsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tenant := opsmcp.Config{Tenant: func(context.Context, *mcp.CallToolRequest) (string, error) { return "acme", nil }}
	local := func(context.Context, *mcp.CallToolRequest, pgx.Tx, createTicket) (ticket, error) {
		return ticket{}, nil
	}
	for name, err := range map[string]error{
		"UnknownTool": opsmcp.AddLocalTool(b.server, b.db.Store, &mcp.Tool{Name: "nope"}, tenant, local),
		"WrongEffect": opsmcp.AddLocalTool(b.server, b.db.Store, &mcp.Tool{Name: "charge-card"}, tenant, local),
		"NoTenant":    opsmcp.AddLocalTool(b.server, b.db.Store, &mcp.Tool{Name: "create-ticket"}, opsmcp.Config{}, local),
		"ReadOnly":    opsmcp.AddLocalTool(b.server, b.db.Store, &mcp.Tool{Name: "create-ticket", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, tenant, local),
		"OpenSchema":  opsmcp.AddLocalTool(b.server, b.db.Store, &mcp.Tool{Name: "create-ticket", InputSchema: map[string]any{"type": "object"}}, tenant, local),
	} {
		require.Error(t, err, name)
	}
}

func (b *bundle) lookup(t *testing.T, k string) ops.Record {
	t.Helper()
	rec, err := b.db.Store.Read(t.Context(), ops.Identity{Tenant: "acme", Tool: "charge-card", Key: k})
	require.NoError(t, err)
	return rec
}

func TestTenantRefusalIsNotSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.server = mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1"}, nil)
	opts := opsmcp.Config{Tenant: func(context.Context, *mcp.CallToolRequest) (string, error) {
		return "", errors.New("token tok_secret expired")
	}}
	require.NoError(t, opsmcp.AddLocalTool(b.server, b.db.Store, &mcp.Tool{Name: "create-ticket"}, opts,
		func(context.Context, *mcp.CallToolRequest, pgx.Tx, createTicket) (ticket, error) {
			return ticket{}, nil
		}))
	res := call(t, b.client(t), "create-ticket", createTicket{Title: "x"}, key("run-10"))
	te := toolError(t, res, opsmcp.ClassTenantInvalid)
	require.NotContains(t, te.Message, "tok_secret")
	require.NotContains(t, res.Content[0].(*mcp.TextContent).Text, "tok_secret")
	require.Zero(t, b.count(t, "opsdesk.operations"))
}
