package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmcp"
)

// DefaultAgentRate is how many agent runs a second an Agent starts.
const DefaultAgentRate = 1.0

// AgentConfig configures an Agent.
type AgentConfig struct {
	// Pool reaches the operation store as a role granted opsdesk_service,
	// in a database where Schema ran.
	Pool *pgxpool.Pool
	// Rate is how many runs a second the agent starts (default
	// DefaultAgentRate).
	Rate float64
	// Seed makes the runs and their faults repeatable.
	Seed uint64
	// Tenants defaults to DefaultTenants: one MCP session each, its
	// tenant standing for the session's authentication.
	Tenants []string
	// Lease of every tool (default DefaultLease).
	Lease time.Duration
}

// Agent is a simulated agent runtime: for each tenant, an orchestrator
// drives an MCP server whose create-ticket tool runs through ops/opsmcp,
// over the SDK's in-memory transport. Some answers are lost on the way back
// and the step is retried with the same key (replayed), some steps are
// retried with arguments the model changed (a conflict the model is shown),
// some are refused by the business, and some calls forget the key (refused,
// nothing written). Its records appear in the console beside the fleet's,
// keyed agent-NNNNN/step-1.
type Agent struct {
	cfg    AgentConfig
	cancel context.CancelFunc
	quit   chan struct{} // closed by Stop: no run starts after it
	done   sync.WaitGroup
	stop   sync.Once

	mu    sync.Mutex
	stats map[string]int64
	errs  []error
}

// StartAgent starts the agent. It runs until ctx is done or Stop is called.
func StartAgent(ctx context.Context, cfg AgentConfig) (*Agent, error) {
	if cfg.Pool == nil {
		return nil, errors.New("agent: no pool")
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultAgentRate
	}
	if cfg.Rate < 0 || interval(cfg.Rate) < time.Millisecond {
		return nil, fmt.Errorf("agent: a rate of %g runs/s: need one in (0, 1000]", cfg.Rate)
	}
	if len(cfg.Tenants) == 0 {
		cfg.Tenants = DefaultTenants
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	store, err := ops.New(cfg.Pool, ops.Config{Tools: Policies(cfg.Lease)})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{cfg: cfg, stats: map[string]int64{}, quit: make(chan struct{})}
	ctx, a.cancel = context.WithCancel(ctx)
	sessions := make([]*agentSession, len(cfg.Tenants))
	for i, tenant := range cfg.Tenants {
		if sessions[i], err = connectAgent(ctx, store, tenant); err != nil {
			a.cancel()
			return nil, err
		}
	}
	a.done.Add(1)
	go func() {
		defer a.done.Done()
		defer func() {
			for _, s := range sessions {
				_ = s.client.Close()
			}
		}()
		a.loop(ctx, sessions)
	}()
	return a, nil
}

// Stop lets the run under way finish, so that its counts match the store,
// and stops the agent.
func (a *Agent) Stop() {
	a.stop.Do(func() {
		close(a.quit)
		a.done.Wait()
		a.cancel()
	})
}

// Stats counts the agent's calls by what the server answered (a tool
// error's class, "created" or "replayed").
func (a *Agent) Stats() map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int64, len(a.stats))
	for k, v := range a.stats {
		out[k] = v
	}
	return out
}

// Err is the first answer the agent did not expect, if any.
func (a *Agent) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.errs...)
}

func (a *Agent) count(what string) {
	a.mu.Lock()
	a.stats[what]++
	a.mu.Unlock()
}

func (a *Agent) unexpected(err error) {
	a.mu.Lock()
	if len(a.errs) < maxErrors {
		a.errs = append(a.errs, err)
	}
	a.mu.Unlock()
}

// agentSession is one tenant's MCP session, over a transport that can
// lose the next answer.
type agentSession struct {
	tenant string
	client *mcp.ClientSession
	conn   *losingConn
}

func connectAgent(ctx context.Context, store *ops.Store, tenant string) (*agentSession, error) {
	server := mcp.NewServer(&mcp.Implementation{Name: "opsdesk-demo-tickets", Version: toolVersion}, nil)
	err := opsmcp.AddLocalTool(server, store, &mcp.Tool{Name: ToolCreateTicket, Description: "Opens a ticket in a queue."},
		opsmcp.Config{
			// The session's authentication, in a real server.
			Tenant:   func(context.Context, *mcp.CallToolRequest) (string, error) { return tenant, nil },
			Version:  toolVersion,
			Additive: true,
		},
		func(ctx context.Context, _ *mcp.CallToolRequest, tx pgx.Tx, in ticketIntent) (ticketResult, error) {
			return createTicket(ctx, tx, tenant, in)
		})
	if err != nil {
		return nil, err
	}
	serverSide, clientSide := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, serverSide, nil); err != nil {
		return nil, fmt.Errorf("agent: connect the server: %w", err)
	}
	s := &agentSession{tenant: tenant}
	client := mcp.NewClient(&mcp.Implementation{Name: "opsdesk-demo-agent", Version: toolVersion}, nil)
	s.client, err = client.Connect(ctx, &losingTransport{Transport: clientSide, conn: &s.conn}, nil)
	if err != nil {
		return nil, fmt.Errorf("agent: connect the client: %w", err)
	}
	return s, nil
}

// What an agent run does, by its share of runs.
const (
	agentPlain    = iota // one call, answered
	agentLost            // the answer is lost; the step is retried with the same key
	agentReworded        // answered, then retried with arguments the model changed
	agentRejected        // the closed queue: a stored rejection, replayed on retry
	agentKeyless         // the orchestrator forgot the key
)

var agentShares = []int{agentPlain: 50, agentLost: 30, agentReworded: 10, agentRejected: 6, agentKeyless: 4}

func (a *Agent) loop(ctx context.Context, sessions []*agentSession) {
	rng := rand.New(rand.NewPCG(a.cfg.Seed, 0xa9e47))
	ticker := time.NewTicker(interval(a.cfg.Rate))
	defer ticker.Stop()
	for run := 1; ; run++ {
		select {
		case <-ctx.Done():
			return
		case <-a.quit:
			return
		case <-ticker.C:
		}
		s := sessions[rng.IntN(len(sessions))]
		in := ticketIntent{Title: ticketTitles[rng.IntN(len(ticketTitles))], Queue: ticketQueues[rng.IntN(len(ticketQueues))], Priority: 1 + rng.IntN(4)}
		kind := pickShare(rng, agentShares)
		if kind == agentRejected {
			in.Queue = closedQueue
		}
		if err := a.play(ctx, s, kind, fmt.Sprintf("agent-%05d/step-1", run), in); err != nil && ctx.Err() == nil {
			a.unexpected(fmt.Errorf("agent run %d (%s): %w", run, s.tenant, err))
		}
	}
}

// play runs one agent step and checks each answer is the one its fault
// calls for.
func (a *Agent) play(ctx context.Context, s *agentSession, kind int, key string, in ticketIntent) error {
	switch kind {
	case agentKeyless:
		return a.expect(ctx, s, "", in, false, opsmcp.ClassKeyMissing)
	case agentRejected:
		if err := a.expect(ctx, s, key, in, false, opsmcp.ClassRejected); err != nil {
			return err
		}
		return a.expect(ctx, s, key, in, false, opsmcp.ClassRejected)
	case agentLost:
		if err := a.expect(ctx, s, key, in, true, ""); err != nil {
			return err
		}
		return a.expect(ctx, s, key, in, false, "replayed")
	case agentReworded:
		if err := a.expect(ctx, s, key, in, false, "created"); err != nil {
			return err
		}
		in.Priority = in.Priority%4 + 1
		return a.expect(ctx, s, key, in, false, opsmcp.ClassConflict)
	}
	return a.expect(ctx, s, key, in, false, "created")
}

// expect calls the tool and checks its answer: want is a tool error's
// class, "created" or "replayed"; lose loses the answer (want is then
// unchecked: nobody saw it).
func (a *Agent) expect(ctx context.Context, s *agentSession, key string, in ticketIntent, lose bool, want string) error {
	params := &mcp.CallToolParams{Name: ToolCreateTicket, Arguments: in}
	if key != "" {
		params.Meta = mcp.Meta{opsmcp.KeyMeta: key}
	}
	callCtx, cancel := context.WithTimeout(ctx, normalTimeout)
	defer cancel()
	if lose {
		s.conn.loseNext(cancel) // the orchestrator gives up on the call
	}
	res, err := s.client.CallTool(callCtx, params)
	if lose {
		a.count("answer lost")
		return nil
	}
	if err != nil {
		return err
	}
	got := "created"
	switch {
	case res.IsError:
		var te opsmcp.ToolError
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &te); err != nil || te.Class == "" {
			return fmt.Errorf("a tool error without a class: %s", raw)
		}
		got = te.Class
	case res.Meta[opsmcp.ReplayedMeta] == true:
		got = "replayed"
	}
	a.count(got)
	if got != want {
		return fmt.Errorf("answered %s, want %s", got, want)
	}
	return nil
}

// pickShare draws an index of shares, each as likely as its share.
func pickShare(rng *rand.Rand, shares []int) int {
	total := 0
	for _, s := range shares {
		total += s
	}
	n := rng.IntN(total)
	for i, s := range shares {
		if n < s {
			return i
		}
		n -= s
	}
	return len(shares) - 1
}

// losingTransport is the client's side of the in-memory transport, able to
// lose the answer to the next tools/call as a broken network would once
// the server has answered.
type losingTransport struct {
	mcp.Transport
	conn **losingConn
}

func (t *losingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	*t.conn = &losingConn{Connection: c}
	return *t.conn, nil
}

type losingConn struct {
	mcp.Connection
	mu      sync.Mutex
	armed   func()      // set: lose the next tools/call's answer, then call it
	pending *jsonrpc.ID // the tools/call whose answer is to be lost
	lost    func()      // called once that answer is dropped
}

// loseNext loses the answer to the next tools/call and calls lost then.
func (c *losingConn) loseNext(lost func()) {
	c.mu.Lock()
	c.armed = lost
	c.mu.Unlock()
}

func (c *losingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Request); ok && r.Method == "tools/call" {
		c.mu.Lock()
		if c.armed != nil {
			id := r.ID
			c.pending, c.lost, c.armed = &id, c.armed, nil
		}
		c.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *losingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if r, ok := msg.(*jsonrpc.Response); ok {
			c.mu.Lock()
			var lost func()
			if c.pending != nil && r.ID == *c.pending {
				lost, c.pending, c.lost = c.lost, nil, nil
			}
			c.mu.Unlock()
			if lost != nil {
				lost()
				continue
			}
		}
		return msg, err
	}
}
