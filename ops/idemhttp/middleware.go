package idemhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/opsdesk/opsdesk/ops"
)

// Defaults of a Config's zero fields.
const (
	// DefaultVersion is the tool version requests are recorded under.
	DefaultVersion = "1"
	// DefaultMaxBody bounds a protected request's body, which is read
	// whole before anything runs.
	DefaultMaxBody = 1 << 20
	// DefaultMaxAnswer bounds the body of a handler's answer: 764 KiB, the
	// most the store's default Config.MaxResultBytes (1 MiB) holds once
	// the body is stored as base64 with up to MaxStoredHeaderBytes of
	// chosen headers.
	DefaultMaxAnswer = 764 << 10
	// MaxStoredHeaderBytes bounds the chosen headers of a stored answer
	// (Config.StoredHeaders), as the JSON they are stored as.
	MaxStoredHeaderBytes = 4 << 10
	// DefaultReplayHeader is set to "true" on replayed answers (the name
	// Stripe uses).
	DefaultReplayHeader = "Idempotent-Replayed"
	// DefaultUnavailableRetryAfter is the Retry-After of a 503.
	DefaultUnavailableRetryAfter = time.Second
)

// DefaultMethods are the methods protected by default: the ones HTTP does
// not define as idempotent (GET, HEAD, PUT, DELETE and OPTIONS are).
func DefaultMethods() []string { return []string{http.MethodPost, http.MethodPatch} }

// DefaultStoredHeaders are the response headers stored and replayed by
// default. Set-Cookie is not among them.
func DefaultStoredHeaders() []string { return []string{"Content-Type", "Content-Language", "Location"} }

// Verdict is what a handler's answer says about its effect, and so what
// the store does with the answer.
type Verdict int

const (
	// Succeeded: the effect happened. The answer is stored and replayed to
	// every retry with the key.
	Succeeded Verdict = iota + 1
	// Rejected: the handler judged the request and refused it for good.
	// The answer is stored as a rejection and replayed.
	Rejected
	// NotApplied: the handler did nothing (it was busy or overloaded).
	// Nothing is stored and the key is released: a retry runs the handler
	// again.
	NotApplied
	// Unknown: the effect may or may not have happened. Nothing is stored
	// and the key's record stays pending, its lease ended at once (nobody
	// is handling it): the tool's effect decides what a retry gets (see
	// Config.Tool).
	Unknown
)

// DefaultClassify reads a handler's status: 408, 425, 429 and 503 say
// nothing was done (NotApplied); other 1xx to 3xx are Succeeded, other 4xx
// Rejected (the request was judged), and other 5xx Unknown (a handler that
// failed midway may have done part of its work).
func DefaultClassify(status int) Verdict {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly,
		status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable:
		return NotApplied
	case status < 400:
		return Succeeded
	case status < 500:
		return Rejected
	}
	return Unknown
}

// Config configures a Middleware.
type Config struct {
	// Tool is the ops tool the endpoint's requests are recorded under
	// (required). Its policy in the store must be external, because the
	// handler's effects are outside the record's transaction (New refuses
	// a tool the store has no policy for, or a local one):
	// ops.EffectIdempotentProvider when running the handler twice for one
	// key cannot repeat its effect (its writes are unique by the key, or
	// it passes the key on to its own provider): an abandoned or Unknown
	// attempt is then run again by the next retry; ops.EffectUnknownOutcome
	// when it could: such an attempt then waits for an operator
	// (409 needs-reconciliation), from the moment the handler returned
	// or panicked, or once the lease of a process that died runs out.
	Tool string
	// Version is the tool's version (default DefaultVersion); it is part
	// of the fingerprint.
	Version string
	// Tenant returns the tenant a request is made for (required): from
	// the service's authentication, never from something the client
	// chose unless the service means it to. A *TenantError chooses the
	// answer's status and detail (401, 403…); any other error is answered
	// 400 tenant-invalid with a generic detail: its text, which may be
	// internal, is never sent. Nothing runs either way.
	Tenant func(*http.Request) (string, error)
	// Methods are the protected methods (default DefaultMethods()); other
	// requests pass through untouched.
	Methods []string
	// StoredHeaders are the response headers stored and replayed (default
	// DefaultStoredHeaders()). The first answer carries every header the
	// handler set.
	StoredHeaders []string
	// MaxBody bounds a protected request's body (default DefaultMaxBody);
	// a larger one is answered 413 before anything runs. It is the only
	// limit on bodies: every body up to it is stored. A JSON body whose
	// canonical intent fits the store's Config.MaxIntentBytes is
	// fingerprinted in canonical form and kept for operators to reveal;
	// a larger one is fingerprinted by its media type and SHA-256, as
	// other bodies are (a retry must then send the same bytes).
	MaxBody int64
	// MaxAnswer bounds the body of the handler's answer (default
	// DefaultMaxAnswer, or less when the store's Config.MaxResultBytes
	// holds less). Answers are stored with their body as base64, so the
	// store holds (MaxResultBytes - MaxStoredHeaderBytes - 34) * 3/4
	// bytes of body; New refuses a MaxAnswer over that. An answer over
	// MaxAnswer, or whose chosen headers are over MaxStoredHeaderBytes,
	// is neither sent nor kept: the handler's Write returns
	// ErrAnswerTooLarge, the client gets 500 answer-too-large, and
	// retries get 410 answer-not-kept (or failed, for a 4xx).
	MaxAnswer int64
	// ReplayHeader is set to "true" on replays (default
	// DefaultReplayHeader).
	ReplayHeader string
	// Classify maps the handler's status to a Verdict (default
	// DefaultClassify).
	Classify func(status int) Verdict
	// UnavailableRetryAfter is the Retry-After of a 503 (default
	// DefaultUnavailableRetryAfter).
	UnavailableRetryAfter time.Duration
	// TypicalDuration is how long the handler usually takes. A 409
	// in-progress answer's Retry-After is what remains of it after the
	// running attempt's time so far, capped by the attempt's lease
	// remainder, in whole seconds rounded up, at least 1: an estimate of
	// when the answer is ready, not a promise. Zero (the
	// default): a moving average of the handler runs this middleware has
	// seen, and the lease's remainder until it has seen one.
	TypicalDuration time.Duration

	// ProblemBase is the base of the problem type URIs (default
	// DefaultProblemBase, this project's documentation): a type is the base
	// followed by the problem's name (Problem.Name), so
	// "https://api.example.com/docs/idempotency#" gives
	// "https://api.example.com/docs/idempotency#key-missing". The draft
	// asks each resource to publish its own idempotency specification:
	// point this at yours. New refuses a base that is not an absolute URI
	// of visible ASCII.
	ProblemBase string
	// ProblemMembers, when set, returns extension members for a problem
	// answer to r (an instance, a trace id, the key from ParseKey): p is
	// the problem as it will be sent. Names of Problem's own members are
	// left out, and so are values that do not marshal: the members
	// clients rely on are always the middleware's. It must not read r's
	// body.
	ProblemMembers func(r *http.Request, p Problem) map[string]any
	// WriteProblem, when set, writes every answer of the middleware's own
	// instead of the default problem document: status, Content-Type and
	// body are its to choose. Cache-Control: no-store, Retry-After (from
	// p.RetryAfter) and, after a panic the middleware passes on over
	// HTTP/1.1, Connection: close are already set when it is called. json.Marshal(p) gives the default document's
	// members, extensions included.
	WriteProblem func(w http.ResponseWriter, r *http.Request, p Problem)
	// Recovered, when set, is told of a handler's panic (its value and
	// the stack where it panicked) once the record is settled and the
	// 500 handler-failed answer sent, and the middleware does not panic
	// again: the answer ends cleanly (no Connection: close; over HTTP/2
	// no stream reset after it), and logging the panic is Recovered's.
	// Nil (the default): the middleware panics again with the handler's
	// value, as net/http users expect (see Wrap). A panic with
	// http.ErrAbortHandler always goes on.
	Recovered func(r *http.Request, value any, stack []byte)
	// MinKeyLength refuses keys shorter than this many bytes (default 0:
	// ParseKey's one byte is enough) with 400 key-invalid. New refuses a
	// negative one, or one over ops.MaxKeyBytes.
	MinKeyLength int
	// ValidateKey, when set, judges the format of every key ParseKey
	// accepts (and MinKeyLength, when set): a non-nil error is answered
	// 400 key-invalid, nothing run, with the error's text as the reason
	// (at most MaxKeyReasonBytes of it, control characters replaced).
	// UUIDKey accepts only UUIDs. The draft's security section
	// recommends keys with enough entropy that clients cannot guess each
	// other's.
	ValidateKey func(key string) error
	// KeyOptional lets a request without an Idempotency-Key header pass
	// through to the handler unprotected, as an unprotected method does:
	// no record, no replay, no fingerprint, and the handler's
	// AttemptFromContext reports false. It is for rolling the middleware
	// out to clients that do not send keys yet; a header that is there
	// but invalid is still answered 400 key-invalid.
	KeyOptional bool
	// IgnoreFields are RFC 6901 JSON pointers (/meta/sent_at,
	// /items/0/trace_id) whose values are left out of a JSON body before
	// it is fingerprinted and kept: two requests that differ only there
	// are the same request. Pointers that name nothing in a body are
	// skipped; an array element removed shifts the later ones, and the
	// pointers apply in their order. A JSON body the library would
	// fingerprint by its bytes (numbers of 2^53 or more, duplicate member
	// names, lone surrogates, \u0000) ignores nothing. New refuses a
	// pointer that is empty (the whole body), does not start with "/",
	// has an escape other than ~0 and ~1, is not UTF-8, or has a "." or
	// ".." segment (a pointer has no dot segments: it would name a member
	// called "..").
	IgnoreFields []string
	// NewKeys, when set, limits how many new keys each tenant may start:
	// the handler runs for at most NewKeys.Keys keys per NewKeys.Per, in
	// a burst of up to Keys. A request over it is answered 429
	// too-many-keys with Retry-After, its key released and nothing run:
	// a retry with the same key after Retry-After may run. Retries of
	// keys already answered are replayed, never limited. The limit is
	// this Middleware's, in this process: N replicas let N times as many
	// through. New refuses a negative Keys or Per, or one set without the
	// other.
	NewKeys KeyLimit
}

// Middleware makes the handlers it wraps answer by the IETF Idempotency-Key
// draft (draft-ietf-httpapi-idempotency-key-header-07), recording every
// protected request in the operation store.
type Middleware struct {
	store   *ops.Store
	opts    Config
	methods map[string]bool
	// maxIntent is the store's Config.MaxIntentBytes.
	maxIntent int
	// effect is the tool's in the store: what a retry after a panic gets.
	effect ops.Effect
	// typical estimates the handler's duration, for Retry-After.
	typical *typical
	// ignore are Config.IgnoreFields, parsed into reference tokens.
	ignore [][]string
	// newKeys is Config.NewKeys' limiter, nil without a limit.
	newKeys *keyLimiter
	// keyless counts the requests KeyOptional let through without a key.
	keyless atomic.Uint64
}

// Keyless is how many requests Config.KeyOptional has let through to the
// handler without an Idempotency-Key since the middleware was made: how
// far a rollout still has to go (export it as a counter).
func (m *Middleware) Keyless() uint64 { return m.keyless.Load() }

// New returns a Middleware recording requests in store. It refuses
// options a request could only be refused for: Config.Tool must have an
// external policy in store (ops.EffectIdempotentProvider or
// ops.EffectUnknownOutcome).
func New(store *ops.Store, opts Config) (*Middleware, error) {
	switch {
	case store == nil:
		return nil, errors.New("idemhttp: nil store")
	case opts.Tool == "":
		return nil, errors.New("idemhttp: Config.Tool is required: the ops tool the endpoint's requests are recorded under")
	case opts.Tenant == nil:
		return nil, errors.New("idemhttp: Config.Tenant is required: the tenant comes from the service, not the client")
	case opts.MaxBody < 0:
		return nil, fmt.Errorf("idemhttp: Config.MaxBody %d is negative", opts.MaxBody)
	case opts.MaxAnswer < 0:
		return nil, fmt.Errorf("idemhttp: Config.MaxAnswer %d is negative", opts.MaxAnswer)
	case opts.UnavailableRetryAfter < 0:
		return nil, fmt.Errorf("idemhttp: Config.UnavailableRetryAfter %v is negative", opts.UnavailableRetryAfter)
	}
	policy, ok := store.Policy(opts.Tool)
	switch {
	case !ok:
		return nil, fmt.Errorf("idemhttp: Config.Tool %q has no policy in the store: add it to ops.Config.Tools, "+
			"with Effect ops.EffectIdempotentProvider or ops.EffectUnknownOutcome", opts.Tool)
	case policy.Effect == ops.EffectLocal:
		return nil, fmt.Errorf("idemhttp: Config.Tool %q has effect %q in the store: a handler's effects are outside the record's "+
			"transaction, so declare it ops.EffectIdempotentProvider or ops.EffectUnknownOutcome", opts.Tool, policy.Effect)
	}
	if opts.TypicalDuration < 0 {
		return nil, fmt.Errorf("idemhttp: Config.TypicalDuration %v is negative", opts.TypicalDuration)
	}
	switch {
	case opts.MinKeyLength < 0:
		return nil, fmt.Errorf("idemhttp: Config.MinKeyLength %d is negative", opts.MinKeyLength)
	case opts.MinKeyLength > ops.MaxKeyBytes:
		return nil, fmt.Errorf("idemhttp: Config.MinKeyLength %d is over the longest key, %d bytes: every key would be refused", opts.MinKeyLength, ops.MaxKeyBytes)
	}
	if opts.ProblemBase == "" {
		opts.ProblemBase = DefaultProblemBase
	}
	if err := checkProblemBase(opts.ProblemBase); err != nil {
		return nil, fmt.Errorf("idemhttp: Config.ProblemBase: %w", err)
	}
	switch l := opts.NewKeys; {
	case l.Keys < 0 || l.Per < 0:
		return nil, fmt.Errorf("idemhttp: Config.NewKeys %d per %v is negative", l.Keys, l.Per)
	case (l.Keys == 0) != (l.Per == 0):
		return nil, fmt.Errorf("idemhttp: Config.NewKeys %d per %v: set both, or neither for no limit", l.Keys, l.Per)
	}
	ignore, err := parsePointers(opts.IgnoreFields)
	if err != nil {
		return nil, fmt.Errorf("idemhttp: Config.IgnoreFields: %w", err)
	}
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	if opts.Methods == nil {
		opts.Methods = DefaultMethods()
	}
	if opts.StoredHeaders == nil {
		opts.StoredHeaders = DefaultStoredHeaders()
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = DefaultMaxBody
	}
	capacity := answerCapacity(store.MaxResultBytes())
	switch {
	case capacity <= 0:
		return nil, fmt.Errorf("idemhttp: the store's Config.MaxResultBytes %d cannot hold an answer: it needs more than %d bytes for the chosen headers and the envelope",
			store.MaxResultBytes(), MaxStoredHeaderBytes+answerEnvelopeBytes)
	case opts.MaxAnswer == 0:
		opts.MaxAnswer = min(DefaultMaxAnswer, capacity)
	case opts.MaxAnswer > capacity:
		return nil, fmt.Errorf("idemhttp: Config.MaxAnswer %d is over what the store's Config.MaxResultBytes %d holds: %d bytes of body, stored as base64 with up to %d bytes of chosen headers",
			opts.MaxAnswer, store.MaxResultBytes(), capacity, MaxStoredHeaderBytes)
	}
	if opts.ReplayHeader == "" {
		opts.ReplayHeader = DefaultReplayHeader
	}
	if opts.Classify == nil {
		opts.Classify = DefaultClassify
	}
	if opts.UnavailableRetryAfter == 0 {
		opts.UnavailableRetryAfter = DefaultUnavailableRetryAfter
	}
	m := &Middleware{store: store, methods: map[string]bool{}, maxIntent: store.MaxIntentBytes(),
		effect: policy.Effect, typical: &typical{configured: opts.TypicalDuration}, ignore: ignore,
		newKeys: newKeyLimiter(opts.NewKeys)}
	for _, method := range opts.Methods {
		if method == "" {
			return nil, errors.New("idemhttp: Config.Methods holds an empty method")
		}
		m.methods[method] = true
	}
	headers := make([]string, len(opts.StoredHeaders))
	for i, h := range opts.StoredHeaders {
		headers[i] = http.CanonicalHeaderKey(h)
	}
	opts.StoredHeaders = headers
	opts.ReplayHeader = http.CanonicalHeaderKey(opts.ReplayHeader)
	m.opts = opts
	return m, nil
}

// Wrap returns next behind the middleware: a protected request runs next at
// most once per (tenant, tool, key), and its retries get next's stored
// answer.
//
// A protected handler that panics has an unknown outcome. The record is
// settled first (its lease ends: the next retry runs it again for an
// EffectIdempotentProvider tool, or waits for an operator), then the
// client gets a whole 500 handler-failed answer saying so (over HTTP/1.1
// with "Connection: close"), and then the middleware panics again with
// the handler's own value. So net/http logs the value and closes the
// connection after the answer (over HTTP/2 it resets the stream after the
// answer's last byte: a client that reads the body to its end gets the
// whole problem document, then a stream error), and a recoverer outside
// the middleware sees the handler's value with the answer already sent:
// it must not answer again (its WriteHeader would be superfluous). With
// Config.Recovered set, the middleware hands it the panic instead and
// the answer ends cleanly. A handler that
// panics with http.ErrAbortHandler asks for no answer: its record is
// settled the same way, and the panic goes on at once, so net/http drops
// the connection without an answer and without a log line.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.methods[r.Method] {
			next.ServeHTTP(w, r)
			return
		}
		m.serve(w, r, next)
	})
}

type attemptKey struct{}

// AttemptFromContext returns the attempt a protected request's handler
// runs as: its identity (tenant, tool, key) and attempt number. A handler
// that calls a provider of its own passes the key on.
func AttemptFromContext(ctx context.Context) (ops.Attempt, bool) {
	a, ok := ctx.Value(attemptKey{}).(ops.Attempt)
	return a, ok
}

// errPanicked is the outcome of a handler that panicked: unknown.
var errPanicked = errors.New("the handler panicked")

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, err := ParseKey(r.Header)
	if err == nil {
		err = m.checkKey(key)
	}
	if errors.Is(err, ErrKeyMissing) && m.opts.KeyOptional {
		m.keyless.Add(1)
		next.ServeHTTP(w, r)
		return
	}
	if errors.Is(err, ErrKeyMissing) {
		m.writeProblem(w, r, Problem{Type: TypeKeyMissing, Title: "Idempotency-Key is missing", Status: http.StatusBadRequest,
			Detail: fmt.Sprintf(`%s %s needs an Idempotency-Key header holding a key unique to this request, such as "8e03978e-40d5-43e8-bc93-6894a57f9324"; nothing ran`, r.Method, r.URL.EscapedPath())}, 0)
		return
	}
	if err != nil {
		m.writeProblem(w, r, Problem{Type: TypeKeyInvalid, Title: "Idempotency-Key is invalid", Status: http.StatusBadRequest,
			Detail: err.Error() + "; nothing ran"}, 0)
		return
	}
	tenant, err := m.opts.Tenant(r)
	if err != nil {
		m.refuseTenant(w, r, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.opts.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		m.writeProblem(w, r, Problem{Type: TypeBodyTooLarge, Title: "The request's body is too large", Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("the body is over the limit of %d bytes; nothing ran", tooLarge.Limit)}, 0)
		return
	case err != nil:
		m.writeProblem(w, r, Problem{Type: TypeRequestInvalid, Title: "The request's body could not be read", Status: http.StatusBadRequest,
			Detail: "reading the body failed: " + err.Error() + "; nothing ran", RetryWithSameKey: true}, 0)
		return
	}
	in, err := intentOf(r, body, m.opts.Tool, m.opts.Version, m.maxIntent, m.ignore)
	if err != nil {
		m.writeProblem(w, r, Problem{Type: TypeRequestInvalid, Title: "The request is invalid", Status: http.StatusBadRequest,
			Detail: err.Error() + "; nothing ran"}, 0)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	req := ops.Request{Identity: ops.Identity{Tenant: tenant, Tool: m.opts.Tool, Key: key}, Version: m.opts.Version, Intent: in}
	var (
		rec      *recorder
		panicked any
		stack    []byte
		verdict  Verdict
		limited  time.Duration
	)
	out, err := ops.DoExternal(r.Context(), m.store, req, func(ctx context.Context, a ops.Attempt) (json.RawMessage, error) {
		// Only here is the key known to be new (or its last attempt to
		// have left it to run again): replays never count.
		if m.newKeys != nil {
			if limited = m.newKeys.take(tenant, time.Now()); limited > 0 {
				return nil, ops.NotApplied(errors.New("the tenant's limit on new keys"))
			}
		}
		rec = newRecorder(m.opts.MaxAnswer)
		start := time.Now()
		panicked, stack = serveCaptured(next, rec, r.WithContext(context.WithValue(ctx, attemptKey{}, a)))
		m.typical.observe(time.Since(start))
		if panicked != nil {
			return nil, errPanicked
		}
		rec.finish()
		stored := rec.stored(m.opts.StoredHeaders)
		verdict = m.opts.Classify(stored.Status)
		if rec.tooLarge = rec.tooLargeReason(stored, m.opts.MaxAnswer); rec.tooLarge != "" {
			// Kept in its place: what the handler answered, and why it
			// is not kept. A replay answers 410 from it.
			stored = storedResponse{Status: stored.Status, NotKept: rec.tooLarge}
		}
		raw, err := json.Marshal(stored)
		if err != nil {
			return nil, fmt.Errorf("encode the handler's answer: %w", err)
		}
		switch verdict {
		case Succeeded:
			return raw, nil
		case Rejected:
			return nil, ops.Reject(json.RawMessage(raw))
		case NotApplied:
			return nil, ops.NotApplied(fmt.Errorf("the handler answered %d", stored.Status))
		}
		return nil, fmt.Errorf("the handler answered %d", stored.Status)
	})
	switch {
	case panicked != nil:
		// Recorded as an unknown outcome, its lease ended: the client is
		// told so, then net/http (or Recovered) does with the panic what
		// the handler meant (see Wrap).
		if panicked == http.ErrAbortHandler { // the value, as net/http compares it
			panic(panicked)
		}
		m.answerPanic(w, r)
		if m.opts.Recovered == nil {
			panic(panicked)
		}
		m.opts.Recovered(r, panicked, stack)
	case limited > 0:
		m.writeProblem(w, r, Problem{Type: TypeTooManyKeys, Title: "Too many new Idempotency-Keys", Status: http.StatusTooManyRequests,
			Detail:           "this account has started as many new requests as this endpoint allows for now; the key was not used: retry with the same key after Retry-After; nothing ran",
			RetryWithSameKey: true}, limited)
	case rec != nil && rec.tooLarge != "":
		// Never the handler's answer cut short, nor one its retries
		// could not get.
		m.answerTooLarge(w, r, rec.tooLarge, verdict)
	case rec != nil:
		// The handler ran: its answer is the truth about this request,
		// whether or not the store could record it.
		rec.send(w)
	case err == nil:
		m.replay(w, r, out.Result, ops.OutcomeSucceeded, out.ResultRef)
	case errors.Is(err, ops.ErrResultNotStored):
		// It took effect, but its answer was too large to keep (over the
		// store's MaxResultBytes): answered like an operator's
		// confirmation, with no answer to replay.
		m.replay(w, r, nil, ops.OutcomeSucceeded, out.ResultRef)
	default:
		var rej *ops.RejectedError
		if errors.As(err, &rej) && rej.Replayed {
			m.replay(w, r, rej.Payload, ops.OutcomeRejected, "")
			return
		}
		m.refuse(w, r, err)
	}
}

// answerPanic tells the client of a handler that panicked what a retry
// gets, as a whole answer sent now: the connection is closed once the
// panic goes on.
func (m *Middleware) answerPanic(w http.ResponseWriter, r *http.Request) {
	p := Problem{Type: TypeHandlerFailed, Title: "The request with this Idempotency-Key failed midway", Status: http.StatusInternalServerError}
	if m.effect == ops.EffectIdempotentProvider {
		p.Detail = "the handler failed before it answered; running it again under this key cannot repeat its effect: retry with the same key"
		p.RetryWithSameKey = true
	} else {
		p.Detail = "the handler failed before it answered, and the request may or may not have taken effect; it is not run again until an operator " +
			"has found out, and retries with this key get a needs-reconciliation answer until then. " +
			"Do not send it with a new key unless you know it did not take effect"
	}
	if r.ProtoMajor == 1 && m.opts.Recovered == nil {
		w.Header().Set("Connection", "close") // net/http closes it anyway
	}
	m.writeProblem(w, r, p, 0)
	_ = http.NewResponseController(w).Flush() // the client may be gone
}

// serveCaptured runs the handler into rec and returns what it panicked
// with, if it did, and the stack where it did.
func serveCaptured(next http.Handler, rec *recorder, r *http.Request) (panicked any, stack []byte) {
	defer func() {
		if panicked = recover(); panicked != nil {
			stack = debug.Stack()
		}
	}()
	next.ServeHTTP(rec, r)
	return nil, nil
}

// replay sends a stored answer. A record completed without one (an
// operator decided after the handler's outcome was unknown) is answered
// with what the decision says.
func (m *Middleware) replay(w http.ResponseWriter, r *http.Request, raw json.RawMessage, outcome ops.RecordOutcome, ref string) {
	var s storedResponse
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	decoded := dec.Decode(&s) == nil && s.Status >= 200 && s.Status <= 999
	if decoded && s.NotKept == "" {
		s.replay(w, m.opts.ReplayHeader)
		return
	}
	why := ""
	if decoded {
		why = fmt.Sprintf(" (the handler answered %d, and %s)", s.Status, s.NotKept)
	}
	if outcome == ops.OutcomeRejected {
		m.writeProblem(w, r, Problem{Type: TypeFailed, Title: "The request with this Idempotency-Key failed", Status: http.StatusGone,
			Detail: "the request with this key did not take effect (it was marked failed, or refused with an answer too large to keep" + why + "); it is not run again. " +
				"Send it with a new key if you still want it"}, 0)
		return
	}
	detail := "the request with this key took effect, but its answer was not kept" + why + "; it is not run again"
	if ref != "" {
		detail += "; its reference is " + strconv.Quote(ref)
	}
	m.writeProblem(w, r, Problem{Type: TypeAnswerNotKept, Title: "The request with this Idempotency-Key took effect", Status: http.StatusGone,
		Detail: detail, Reference: ref}, 0)
}

// refuse answers a request that did not run with the problem its error
// names.
func (m *Middleware) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var busy *ops.InProgressError
	switch {
	case errors.As(err, &busy):
		m.writeProblem(w, r, Problem{Type: TypeInProgress, Title: "A request is outstanding for this Idempotency-Key", Status: http.StatusConflict,
			Detail: "a request with this key is being handled now; retry with the same key after Retry-After to get its answer", RetryWithSameKey: true},
			m.typical.retryAfter(busy.RetryAfter, busy.Running))
	case errors.Is(err, ops.ErrIntentConflict):
		m.writeProblem(w, r, Problem{Type: TypeKeyReused, Title: "Idempotency-Key is already used", Status: http.StatusUnprocessableEntity,
			Detail: "this key was first used for a different request (method, path, query or body); a key names one request: send a new request with a new key; nothing ran"}, 0)
	case errors.Is(err, ops.ErrNeedsReconciliation):
		m.writeProblem(w, r, Problem{Type: TypeNeedsReconciliation, Title: "The outcome of a request with this Idempotency-Key is unknown", Status: http.StatusConflict,
			Detail: "an earlier request with this key may or may not have taken effect; it is not run again until an operator has found out, and retries get this answer until then. " +
				"Do not send it with a new key unless you know the first did not take effect; nothing ran"}, 0)
	case errors.Is(err, ops.ErrExpired):
		m.writeProblem(w, r, Problem{Type: TypeExpired, Title: "Idempotency-Key has expired", Status: http.StatusGone,
			Detail: "the request with this key was handled long ago, its answer is no longer kept, and this endpoint does not run late retries; nothing ran"}, 0)
	case errors.Is(err, ops.ErrInvalidRequest):
		m.writeProblem(w, r, Problem{Type: TypeRequestInvalid, Title: "The request is invalid", Status: http.StatusBadRequest,
			Detail: err.Error() + "; nothing ran"}, 0)
	case errors.Is(err, ops.ErrUnknownTool), errors.Is(err, ops.ErrWrongEffect):
		m.writeProblem(w, r, Problem{Type: TypeMisconfigured, Title: "The endpoint is misconfigured", Status: http.StatusInternalServerError,
			Detail: "the endpoint's idempotency tool is not configured for HTTP requests; nothing ran"}, 0)
	case errors.Is(err, ops.ErrStoreRefused):
		// A privilege, the schema or the store's state machine: retrying
		// cannot help until someone fixes the cause.
		m.writeProblem(w, r, Problem{Type: TypeMisconfigured, Title: "The endpoint is misconfigured", Status: http.StatusInternalServerError,
			Detail: "the idempotency store refused the request (a privilege, the schema or its rules); nothing ran"}, 0)
	default:
		// ErrUnavailable, and any store failure before the handler ran:
		// nothing ran, and nothing this request did can run twice.
		m.writeProblem(w, r, Problem{Type: TypeUnavailable, Title: "The service cannot take this request now", Status: http.StatusServiceUnavailable,
			Detail: "the idempotency store failed before anything ran; retry with the same key after Retry-After", RetryWithSameKey: true},
			m.opts.UnavailableRetryAfter)
	}
}
