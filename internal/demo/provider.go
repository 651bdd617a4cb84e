package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
)

// Headers of the provider's action endpoint.
const (
	// IdempotencyKeyHeader carries the operation's key, as the IETF draft
	// defines it (a quoted string; the bare key is accepted too): the
	// provider acts at most once per (tenant, tool, key) and answers a
	// repeated key with the first call's answer.
	IdempotencyKeyHeader = idemhttp.KeyHeader
	// TenantHeader names the tenant the call is made for. It stands for
	// the API key a real provider would know its customer by.
	TenantHeader = "Tenant"
	// FaultHeader asks the provider to misbehave in one of the Fault* ways.
	FaultHeader = "Simulate-Fault"
	// ReplayedHeader is "true" on an answer to a repeated key.
	ReplayedHeader = idemhttp.DefaultReplayHeader
)

// Faults the provider simulates on request (FaultHeader).
const (
	// FaultSlow ("slow=8s") acts and answers after that long: the caller's
	// lease stays live, renewed, while it waits.
	FaultSlow = "slow"
	// FaultLoseResponse acts, then never answers: the caller times out
	// although the provider has a reference.
	FaultLoseResponse = "lose-response"
	// FaultTimeoutBeforeActing never acts and never answers: the caller
	// times out and the provider has nothing.
	FaultTimeoutBeforeActing = "timeout-before-acting"
	// FaultUnavailable answers 503 at once, saying nothing was done.
	FaultUnavailable = "unavailable"
)

// LookupPath is the provider's outcome lookup as a URL path template over
// {tenant}, {tool} and {provider_key}, each one escaped path segment (as
// opsdesk's lookups send them): 200 {"found":true,"ref":"…"} when the
// provider acted on the Idempotency-Key it names, 404 {"found":false}
// when it did not. The fleet sends ops.Identity.ProviderKey as the key,
// and the catalog's lookup asks for the same.
const LookupPath = "/lookup/{tenant}/{tool}/{provider_key}"

// maxBody bounds the body of a request to the provider and of its answer.
const maxBody = 64 << 10

// Provider is the simulated external provider: an HTTP server on
// 127.0.0.1 whose action endpoints answer by the IETF Idempotency-Key draft
// (through idemhttp, over an operation store of its own), which answers
// outcome lookups by key and misbehaves on request. Its ledger of what it
// did is the ground truth behind every stuck record.
type Provider struct {
	url     string
	srv     *http.Server
	served  chan struct{}
	closing chan struct{}
	closed  sync.Once
	holding atomic.Int64

	mu      sync.Mutex
	effects map[ops.Identity]string // the reference of every effect
	issued  map[string]int          // references issued per tool
}

// providerTools are the tools the provider acts for.
var providerTools = []string{ToolSendEmail, ToolChargeCard, ToolDeployService}

// ProviderConfig configures a Provider.
type ProviderConfig struct {
	// Pool reaches the provider's own operation store, where idemhttp
	// records its requests: a migrated database of its own (not the
	// fleet's, whose records the console shows), as a role granted
	// opsdesk_service.
	Pool *pgxpool.Pool
	// Lease of the provider's request records (default DefaultLease).
	Lease time.Duration
}

// actionAnswer is the body of a 200 answer to an action.
type actionAnswer struct {
	Ref string `json:"ref"`
}

// apiError is the body of the provider's own error answers (the
// middleware's are RFC 9457 problems).
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Applied is false when the provider guarantees it did nothing.
	Applied bool `json:"applied"`
}

// lookupAnswer is the body of a lookup answer.
type lookupAnswer struct {
	Found bool   `json:"found"`
	Ref   string `json:"ref,omitempty"`
}

// StartProvider starts a provider on a random port of 127.0.0.1. Close
// stops it; the pool stays the caller's.
func StartProvider(cfg ProviderConfig) (*Provider, error) {
	if cfg.Pool == nil {
		return nil, errors.New("provider: no pool for its operation store")
	}
	lease := cfg.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	// The handler is idempotent per identity (its ledger holds one effect
	// per key), so an attempt that died or whose answer was lost is run
	// again by the next request with the key, which finds the effect.
	policies := map[string]ops.Policy{}
	for _, tool := range providerTools {
		policies[tool] = ops.Policy{Effect: ops.EffectIdempotentProvider, Lease: lease}
	}
	store, err := ops.New(cfg.Pool, ops.Config{Tools: policies, Owner: "provider"})
	if err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	p := &Provider{
		served:  make(chan struct{}),
		closing: make(chan struct{}),
		effects: map[ops.Identity]string{},
		issued:  map[string]int{},
	}
	mux := http.NewServeMux()
	for _, tool := range providerTools {
		idem, err := idemhttp.New(store, idemhttp.Config{Tool: tool, Tenant: tenantOf, MaxBody: maxBody})
		if err != nil {
			return nil, fmt.Errorf("provider: %w", err)
		}
		mux.Handle("POST /v1/"+tool, checkFault(idem.Wrap(http.HandlerFunc(p.handleAction))))
	}
	mux.HandleFunc("GET "+LookupPath, p.handleLookup)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the provider: %w", err)
	}
	p.url = "http://" + ln.Addr().String()
	p.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		// Aborted answers (the simulated faults) are not worth a log line.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln) // ErrServerClosed after Close
	}()
	return p, nil
}

// URL is the provider's base URL, http://127.0.0.1:PORT.
func (p *Provider) URL() string { return p.url }

// Close stops the provider. Calls it holds (simulated hangs) are aborted.
func (p *Provider) Close() error {
	var err error
	p.closed.Do(func() {
		close(p.closing)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err = p.srv.Shutdown(ctx); err != nil {
			err = errors.Join(err, p.srv.Close())
		}
		<-p.served
	})
	return err
}

// Effect tells whether the provider acted on an operation, and its
// reference if it did: the ground truth a lookup reports. id is as the
// provider knows it: the tenant and tool of the call, and the key it was
// sent (see ProviderIdentity for the fleet's calls).
func (p *Provider) Effect(id ops.Identity) (ref string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ref, ok = p.effects[id]
	return ref, ok
}

// Holding is how many calls the provider holds without answering
// (FaultLoseResponse, FaultTimeoutBeforeActing, FaultSlow) right now.
func (p *Provider) Holding() int { return int(p.holding.Load()) }

// Effects is how many effects the provider applied (repeated keys apply
// none).
func (p *Provider) Effects() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.effects)
}

// ProviderIdentity is the identity under which the provider knows one of
// the fleet's operations: its tenant (the customer) and tool (the
// endpoint), and the provider key the fleet sends as Idempotency-Key.
func ProviderIdentity(id ops.Identity) ops.Identity {
	return ops.Identity{Tenant: id.Tenant, Tool: id.Tool, Key: id.ProviderKey()}
}

// tenantOf is the provider's tenant: its customer, named by TenantHeader
// (the demo's stand-in for an API key).
func tenantOf(r *http.Request) (string, error) {
	if t := r.Header.Get(TenantHeader); t != "" {
		return t, nil
	}
	return "", errors.New("the " + TenantHeader + " header is required")
}

// checkFault refuses a malformed FaultHeader before the request is
// recorded: a fault is how to misbehave, not part of the request.
func checkFault(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := parseFault(r.Header.Get(FaultHeader)); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Code: "bad_request", Message: err.Error()})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// handleAction acts once per identity; idemhttp, in front of it, has
// parsed the key, fingerprinted the request and replays stored answers.
func (p *Provider) handleAction(w http.ResponseWriter, r *http.Request) {
	at, ok := idemhttp.AttemptFromContext(r.Context())
	if !ok {
		writeJSON(w, http.StatusInternalServerError, apiError{Code: "internal", Message: "no idempotency key in the request's context"})
		return
	}
	body, err := io.ReadAll(r.Body) // bounded and buffered by idemhttp
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Code: "bad_request", Message: "read body: " + err.Error()})
		return
	}
	fault, delay, _ := parseFault(r.Header.Get(FaultHeader)) // checked by checkFault

	switch fault {
	case FaultUnavailable:
		// 503: nothing done, and idemhttp releases the key.
		writeJSON(w, http.StatusServiceUnavailable, apiError{Code: "unavailable",
			Message: "the provider is overloaded; nothing was done, try again later"})
		return
	case FaultTimeoutBeforeActing:
		p.hang(r)
	case FaultSlow:
		p.holding.Add(1)
		defer p.holding.Add(-1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			// The caller gave up before the provider got to it.
			panic(http.ErrAbortHandler)
		case <-p.closing:
			panic(http.ErrAbortHandler)
		}
	}
	if status, refusal := decide(at.Tool, body); refusal != nil {
		writeJSON(w, status, refusal)
		return
	}
	ref := p.act(at.Identity)
	if fault == FaultLoseResponse {
		p.hang(r)
	}
	writeJSON(w, http.StatusOK, actionAnswer{Ref: ref})
}

// hang holds the call until the caller gives up or the provider closes,
// then drops the connection without an answer.
func (p *Provider) hang(r *http.Request) {
	p.holding.Add(1)
	defer p.holding.Add(-1)
	select {
	case <-r.Context().Done():
	case <-p.closing:
	}
	panic(http.ErrAbortHandler)
}

// act applies the effect once per identity, like a ledger unique by key:
// an attempt run again after its answer was lost finds the effect.
func (p *Provider) act(id ops.Identity) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ref, done := p.effects[id]; done {
		return ref
	}
	p.issued[id.Tool]++
	ref := fmt.Sprintf("%s-%d", refPrefix(id.Tool), 1000+p.issued[id.Tool])
	p.effects[id] = ref
	return ref
}

func refPrefix(tool string) string {
	switch tool {
	case ToolSendEmail:
		return "MSG"
	case ToolChargeCard:
		return "CH"
	case ToolDeployService:
		return "DEP"
	}
	return "REF"
}

// decide is the provider's business judgement of a request: a status and
// refusal, or nil to go ahead. It depends on the request alone, so a
// repeated request gets the same answer.
func decide(tool string, body []byte) (int, *apiError) {
	var req struct {
		Card        string `json:"card"`
		Version     string `json:"version"`
		Environment string `json:"environment"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return http.StatusBadRequest, &apiError{Code: "bad_request", Message: "the body is not a JSON object"}
	}
	switch {
	case tool == ToolChargeCard && req.Card == declinedCard:
		return http.StatusPaymentRequired, &apiError{Code: "card_declined", Message: "the card was declined"}
	case tool == ToolDeployService && req.Environment == "prod" && strings.Contains(req.Version, "-rc"):
		return http.StatusUnprocessableEntity, &apiError{Code: "release_candidate",
			Message: "release candidates are not deployed to prod"}
	}
	return 0, nil
}

// declinedCard is the test card the provider always declines.
const declinedCard = "tok_declined"

// handleLookup answers for the identity the escaped path names: the mux
// matches wildcards against the escaped path and PathValue unescapes one
// segment, so %2E%2E is the key .. and %2F a slash inside a key, never a
// dot segment or a separator.
func (p *Provider) handleLookup(w http.ResponseWriter, r *http.Request) {
	id := ops.Identity{Tenant: r.PathValue("tenant"), Tool: r.PathValue("tool"), Key: r.PathValue("provider_key")}
	ref, ok := p.Effect(id)
	if !ok {
		writeJSON(w, http.StatusNotFound, lookupAnswer{Found: false})
		return
	}
	writeJSON(w, http.StatusOK, lookupAnswer{Found: true, Ref: ref})
}

// parseFault reads FaultHeader: empty, a Fault* name, or slow=DURATION.
func parseFault(v string) (fault string, delay time.Duration, err error) {
	name, arg, hasArg := strings.Cut(strings.TrimSpace(v), "=")
	switch name {
	case "", FaultLoseResponse, FaultTimeoutBeforeActing, FaultUnavailable:
		if hasArg {
			return "", 0, fmt.Errorf("%s: fault %q takes no argument", FaultHeader, name)
		}
		return name, 0, nil
	case FaultSlow:
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 || d > time.Minute {
			return "", 0, fmt.Errorf("%s: write slow=DURATION, at most 1m (got %q)", FaultHeader, v)
		}
		return name, d, nil
	}
	return "", 0, fmt.Errorf("%s: unknown fault %q", FaultHeader, name)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the caller may be gone
}
