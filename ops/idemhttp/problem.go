package idemhttp

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ProblemContentType is the media type of the middleware's error answers
// (RFC 9457).
const ProblemContentType = "application/problem+json"

// DefaultProblemBase is the base of the problem type URIs unless
// Config.ProblemBase names another: sections of this project's
// documentation.
const DefaultProblemBase = "https://github.com/opsdesk/opsdesk/blob/main/docs/idempotency-key.md#"

// The problem types the middleware answers with, under DefaultProblemBase.
// Each URI names a section of the project's documentation; clients match
// on the URI, never on the title or detail. With Config.ProblemBase set,
// a type is that base followed by the same name (Problem.Name).
const (
	problemBase = DefaultProblemBase

	// TypeKeyMissing (400): a protected method without the header.
	TypeKeyMissing = problemBase + "key-missing"
	// TypeKeyInvalid (400): an empty, over-long or malformed key, or the
	// header sent twice.
	TypeKeyInvalid = problemBase + "key-invalid"
	// TypeTenantInvalid (400): the service's Tenant function refused the
	// request.
	TypeTenantInvalid = problemBase + "tenant-invalid"
	// TypeRequestInvalid (400): a body that cannot be read, or that says
	// it is JSON and is not.
	TypeRequestInvalid = problemBase + "request-invalid"
	// TypeBodyTooLarge (413): a body over Config.MaxBody.
	TypeBodyTooLarge = problemBase + "body-too-large"
	// TypeTooManyKeys (429): the tenant started more new keys than
	// Config.NewKeys allows; the key was released and nothing ran.
	TypeTooManyKeys = problemBase + "too-many-keys"
	// TypeInProgress (409): a request with the key is being handled now.
	TypeInProgress = problemBase + "in-progress"
	// TypeKeyReused (422): the key was first used for a different request.
	TypeKeyReused = problemBase + "key-reused"
	// TypeNeedsReconciliation (409): an earlier request with the key may
	// or may not have taken effect; an operator must decide.
	TypeNeedsReconciliation = problemBase + "needs-reconciliation"
	// TypeExpired (410): the key's record was purged and the endpoint
	// refuses late retries.
	TypeExpired = problemBase + "expired"
	// TypeUnavailable (503): the operation store failed before anything
	// ran.
	TypeUnavailable = problemBase + "unavailable"
	// TypeAnswerNotKept (410): the key's request took effect, but no
	// answer of the handler's was stored: an operator confirmed the
	// effect after the handler's outcome was unknown, or the answer was
	// over the store's Config.MaxResultBytes.
	TypeAnswerNotKept = problemBase + "answer-not-kept"
	// TypeFailed (410): the key's request failed for good: an operator
	// found it did not take effect and marked it failed, or the handler
	// refused it (4xx) with an answer over the store's
	// Config.MaxResultBytes.
	TypeFailed = problemBase + "failed"
	// TypeMisconfigured (500): the endpoint's tool is unknown to the store
	// or has a local effect (New refuses both), or the store refused the
	// request (a privilege, the schema or its rules).
	TypeMisconfigured = problemBase + "misconfigured"
	// TypeHandlerFailed (500): the handler panicked before it answered;
	// whether it took effect is unknown. retry_with_same_key says what a
	// retry gets: true for an EffectIdempotentProvider tool (the retry
	// runs it again under the key), false for an EffectUnknownOutcome one
	// (the key needs an operator, as needs-reconciliation says).
	TypeHandlerFailed = problemBase + "handler-failed"
	// TypeAnswerTooLarge (500): the handler ran, but its answer was over
	// Config.MaxAnswer (or its chosen headers over MaxStoredHeaderBytes),
	// so it is neither sent nor kept. The detail says what retries with
	// the key get: 410 answer-not-kept when it took effect.
	TypeAnswerTooLarge = problemBase + "answer-too-large"
)

// Problem is the body of every answer the middleware gives instead of the
// handler's: an RFC 9457 problem document with one extension member, and
// those Config.ProblemMembers adds.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// RetryWithSameKey says whether sending the same request again with
	// the same key (after Retry-After, when the answer has one) is safe
	// and may succeed. False: the same request with the same key will get
	// this answer again; fix the request, or wait for an operator.
	RetryWithSameKey bool `json:"retry_with_same_key"`
	// Reference is the effect's reference (a payment id, a ticket
	// number), when an answer-not-kept problem knows it.
	Reference string `json:"reference,omitempty"`

	// Name is the problem's name, the same under any base: key-missing,
	// in-progress… (the part of a Type constant after DefaultProblemBase).
	// It is not a member of the document.
	Name string `json:"-"`
	// RetryAfter is the answer's Retry-After when positive, sent in whole
	// seconds rounded up. It is not a member of the document.
	RetryAfter time.Duration `json:"-"`
	// Extensions are the members Config.ProblemMembers returned, written
	// after the others by MarshalJSON.
	Extensions map[string]any `json:"-"`
}

// problemMembers are the members of every Problem, which Extensions cannot
// replace.
var problemMembers = map[string]bool{"type": true, "title": true, "status": true, "detail": true,
	"retry_with_same_key": true, "reference": true}

// MarshalJSON writes the problem's members, then its Extensions in the
// order of their names. An extension named like a member of Problem, or
// whose value does not marshal, is left out: the members clients rely on
// are always the middleware's.
func (p Problem) MarshalJSON() ([]byte, error) {
	type plain Problem // without this method
	body, err := json.Marshal(plain(p))
	if err != nil || len(p.Extensions) == 0 {
		return body, err
	}
	names := make([]string, 0, len(p.Extensions))
	for name := range p.Extensions {
		if !problemMembers[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	body = body[:len(body)-1] // the closing brace
	for _, name := range names {
		v, err := json.Marshal(p.Extensions[name])
		if err != nil {
			continue
		}
		n, _ := json.Marshal(name) // a string always marshals
		body = append(append(append(append(body, ','), n...), ':'), v...)
	}
	return append(body, '}'), nil
}

// checkProblemBase refuses a Config.ProblemBase that is not an absolute
// URI of visible ASCII, which every type is built on.
func checkProblemBase(base string) error {
	for i := 0; i < len(base); i++ {
		if c := base[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("byte 0x%02x at %d is not visible ASCII, as a URI's characters are", c, i)
		}
	}
	u, err := url.Parse(base)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URI: %w", base, err)
	case !u.IsAbs() || u.Opaque != "" || u.Host == "":
		return fmt.Errorf("%q is not an absolute URI with a host, such as \"https://api.example.com/docs/idempotency#\"", base)
	}
	return nil
}

// writeProblem answers r with p, under the service's base and members,
// by its Config.WriteProblem or as a problem document. A positive
// retryAfter is sent as Retry-After in whole seconds, rounded up.
func (m *Middleware) writeProblem(w http.ResponseWriter, r *http.Request, p Problem, retryAfter time.Duration) {
	p.Name = strings.TrimPrefix(p.Type, problemBase)
	p.Type = m.opts.ProblemBase + p.Name
	p.RetryAfter = retryAfter
	if m.opts.ProblemMembers != nil {
		p.Extensions = m.opts.ProblemMembers(r, p)
	}
	h := w.Header()
	// An answer about one attempt, never about the resource.
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	}
	if m.opts.WriteProblem != nil {
		m.opts.WriteProblem(w, r, p)
		return
	}
	h.Set("Content-Type", ProblemContentType)
	h.Set("Content-Language", "en")
	body, err := json.Marshal(p)
	if err != nil {
		// Strings, an int, a bool and extensions that marshal.
		panic(err)
	}
	body = append(body, '\n')
	// A length, not chunks: the answer is whole even when the connection
	// is closed right after it (a handler's panic, see Middleware.Wrap).
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body) // the client may be gone
}

// answerTooLarge answers a request whose handler ran but whose answer
// cannot be kept (why): the client is told now what its retries will be
// told, instead of an answer they could never get.
func (m *Middleware) answerTooLarge(w http.ResponseWriter, r *http.Request, why string, v Verdict) {
	var then string
	retry := false
	switch v {
	case Succeeded:
		then = "the request took effect; retries with this key get 410 answer-not-kept and do not run it again"
	case Rejected:
		then = "the handler refused the request; retries with this key get 410 failed and do not run it again"
	case NotApplied:
		then = "the handler did nothing, and a retry with this key runs it again"
		retry = true
	default:
		then = "the outcome is unknown, and was recorded so: the tool's effect decides what a retry gets"
	}
	m.writeProblem(w, r, Problem{Type: TypeAnswerTooLarge, Title: "The handler's answer is too large to keep", Status: http.StatusInternalServerError,
		Detail: "the handler's answer was not sent: " + why + "; " + then, RetryWithSameKey: retry}, 0)
}
