package demo

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsdesk/opsdesk/ops"
)

// Headers of the provider's action endpoint.
const (
	// IdempotencyKeyHeader carries the operation's key: the provider acts
	// at most once per (tenant, tool, key) and answers a repeated key with
	// the first call's reference.
	IdempotencyKeyHeader = "Idempotency-Key"
	// TenantHeader names the tenant the call is made for.
	TenantHeader = "Tenant"
	// FaultHeader asks the provider to misbehave in one of the Fault* ways.
	FaultHeader = "Simulate-Fault"
	// ReplayedHeader is "true" on an answer to a repeated key.
	ReplayedHeader = "Idempotent-Replayed"
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
// {tenant}, {tool} and {key}, each one escaped path segment (as opsdesk's
// lookups send them): 200 {"found":true,"ref":"…"} when the provider
// acted, 404 {"found":false} when it did not.
const LookupPath = "/lookup/{tenant}/{tool}/{key}"

// maxBody bounds a request body.
const maxBody = 64 << 10

// Provider is the simulated external provider: an HTTP server on
// 127.0.0.1 that honours idempotency keys, answers outcome lookups by key,
// and misbehaves on request. Its record of what it did is the ground truth
// behind every stuck record.
type Provider struct {
	url     string
	srv     *http.Server
	served  chan struct{}
	closing chan struct{}
	closed  sync.Once
	holding atomic.Int64

	mu      sync.Mutex
	effects map[ops.Identity]effect
	issued  map[string]int // references issued per tool
}

// effect is something the provider did.
type effect struct {
	ref string
	// body is the SHA-256 of the request that caused it: the same key with
	// another request is refused, as real providers do.
	body [sha256.Size]byte
}

// actionAnswer is the body of a 200 answer to an action.
type actionAnswer struct {
	Ref      string `json:"ref"`
	Replayed bool   `json:"replayed"`
}

// apiError is the body of an error answer.
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
// stops it.
func StartProvider() (*Provider, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the provider: %w", err)
	}
	p := &Provider{
		url:     "http://" + ln.Addr().String(),
		served:  make(chan struct{}),
		closing: make(chan struct{}),
		effects: map[ops.Identity]effect{},
		issued:  map[string]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/{tool}", p.handleAction)
	mux.HandleFunc("GET "+LookupPath, p.handleLookup)
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
// reference if it did: the ground truth a lookup reports.
func (p *Provider) Effect(id ops.Identity) (ref string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.effects[id]
	return e.ref, ok
}

// Holding is how many calls the provider holds without answering
// (FaultLoseResponse, FaultTimeoutBeforeActing) right now.
func (p *Provider) Holding() int { return int(p.holding.Load()) }

// Effects is how many effects the provider applied (repeated keys apply
// none).
func (p *Provider) Effects() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.effects)
}

func (p *Provider) handleAction(w http.ResponseWriter, r *http.Request) {
	id := ops.Identity{Tenant: r.Header.Get(TenantHeader), Tool: r.PathValue("tool"), Key: r.Header.Get(IdempotencyKeyHeader)}
	if id.Tenant == "" || id.Key == "" {
		writeJSON(w, http.StatusBadRequest, apiError{Code: "bad_request",
			Message: "the " + TenantHeader + " and " + IdempotencyKeyHeader + " headers are required"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Code: "bad_request", Message: "read body: " + err.Error()})
		return
	}
	fault, delay, err := parseFault(r.Header.Get(FaultHeader))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Code: "bad_request", Message: err.Error()})
		return
	}

	switch fault {
	case FaultUnavailable:
		writeJSON(w, http.StatusServiceUnavailable, apiError{Code: "unavailable",
			Message: "the provider is overloaded; nothing was done, try again later"})
		return
	case FaultTimeoutBeforeActing:
		p.hang(r)
	case FaultSlow:
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			// The caller gave up before the provider got to it.
			panic(http.ErrAbortHandler)
		case <-p.closing:
			panic(http.ErrAbortHandler)
		}
	}
	if status, refusal := decide(id.Tool, body); refusal != nil {
		writeJSON(w, status, refusal)
		return
	}
	ref, replayed, ok := p.act(id, body)
	if !ok {
		writeJSON(w, http.StatusUnprocessableEntity, apiError{Code: "idempotency_key_reused",
			Message: "this key was used with a different request; nothing was done"})
		return
	}
	if fault == FaultLoseResponse {
		p.hang(r)
	}
	w.Header().Set(ReplayedHeader, strconv.FormatBool(replayed))
	writeJSON(w, http.StatusOK, actionAnswer{Ref: ref, Replayed: replayed})
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

// act applies the effect once per identity. ok is false when the identity
// was used with another request.
func (p *Provider) act(id ops.Identity, body []byte) (ref string, replayed, ok bool) {
	sum := sha256.Sum256(body)
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, done := p.effects[id]; done {
		return e.ref, true, e.body == sum
	}
	p.issued[id.Tool]++
	ref = fmt.Sprintf("%s-%d", refPrefix(id.Tool), 1000+p.issued[id.Tool])
	p.effects[id] = effect{ref: ref, body: sum}
	return ref, false, true
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
	id := ops.Identity{Tenant: r.PathValue("tenant"), Tool: r.PathValue("tool"), Key: r.PathValue("key")}
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
