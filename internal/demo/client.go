package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
)

// providerClient is how the fleet calls the provider.
type providerClient struct {
	base      string
	transport *http.Transport
	http      *http.Client
}

func newProviderClient(base string) *providerClient {
	// Its own transport, not the default one: no proxy for a loopback
	// provider, and idle connections that close with the fleet.
	tr := &http.Transport{
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
	}
	return &providerClient{base: base, transport: tr, http: &http.Client{Transport: tr}}
}

func (c *providerClient) close() { c.transport.CloseIdleConnections() }

// providerError is a definite answer from the provider that is not a
// success: the provider did not act.
type providerError struct {
	Status int
	apiError
}

func (e *providerError) Error() string {
	return fmt.Sprintf("provider answered %d %s: %s", e.Status, e.Code, e.Message)
}

// business tells a business refusal (stored as a rejection) from a
// transient one.
func (e *providerError) business() bool {
	return e.Status == http.StatusPaymentRequired || e.Status == http.StatusUnprocessableEntity
}

// act asks the provider to apply intent for attempt a, under its provider
// key (ops.Identity.ProviderKey: the raw key is unique only within a
// tenant and a tool), with an optional simulated fault, waiting at most
// timeout. It returns the provider's
// reference; a *providerError when the provider answered without acting;
// ops.NotApplied when the call could not be sent; and any other error when
// nobody knows whether it acted. While an earlier call with the key is
// still being handled (409, the draft's answer) it retries within timeout.
func (c *providerClient) act(ctx context.Context, a ops.Attempt, intent any, fault string, timeout time.Duration) (string, error) {
	body, err := json.Marshal(intent)
	if err != nil {
		return "", ops.NotApplied(err)
	}
	id := a.Identity
	key, err := idemhttp.FormatKey(a.ProviderKey())
	if err != nil {
		return "", ops.NotApplied(fmt.Errorf("the key cannot be sent to the provider: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		ref, retryAfter, err := c.post(ctx, id, key, body, fault)
		if retryAfter == 0 {
			return ref, err
		}
		// Never past the deadline: then the outcome stays unknown.
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w; gave up waiting: %w", err, ctx.Err())
		case <-time.After(min(wait, retryAfter)):
		}
	}
}

// post makes one call. A positive retryAfter means the key's earlier call
// is still being handled: the same call may be made again then.
func (c *providerClient) post(ctx context.Context, id ops.Identity, key string, body []byte, fault string) (ref string, retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/"+url.PathEscape(id.Tool), bytes.NewReader(body))
	if err != nil {
		return "", 0, ops.NotApplied(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(TenantHeader, id.Tenant)
	req.Header.Set(IdempotencyKeyHeader, key)
	if fault != "" {
		req.Header.Set(FaultHeader, fault)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("call the provider: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", 0, fmt.Errorf("read the provider's answer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		var ans actionAnswer
		if err := json.Unmarshal(raw, &ans); err != nil || ans.Ref == "" {
			return "", 0, errors.New("provider answered 200 without a reference")
		}
		return ans.Ref, 0, nil
	case resp.Header.Get("Content-Type") == idemhttp.ProblemContentType:
		return problemError(resp, raw)
	}
	perr := &providerError{Status: resp.StatusCode}
	if err := json.Unmarshal(raw, &perr.apiError); err != nil {
		// Not the provider's own answer: nothing says it did not act.
		return "", 0, fmt.Errorf("provider answered %s with an unreadable body", resp.Status)
	}
	return "", 0, perr
}

// problemError reads the idempotency middleware's answer: the call was
// not run. What that says about the operation depends on the problem.
func problemError(resp *http.Response, raw []byte) (string, time.Duration, error) {
	var p idemhttp.Problem
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", 0, fmt.Errorf("provider answered %s with an unreadable problem", resp.Status)
	}
	switch p.Type {
	case idemhttp.TypeInProgress:
		// An earlier call with the key runs, or its answer was lost a
		// moment ago: this one may be retried, and until it gets an
		// answer the outcome is unknown.
		after, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || after < 1 {
			after = 1
		}
		return "", time.Duration(after) * time.Second, fmt.Errorf("provider answered %d: %s", p.Status, p.Detail)
	case idemhttp.TypeKeyReused:
		// As real providers do, and as the provider did before it answered
		// by the draft: a business refusal, stored.
		return "", 0, &providerError{Status: p.Status, apiError: apiError{Code: "idempotency_key_reused", Message: p.Detail}}
	case idemhttp.TypeKeyMissing, idemhttp.TypeKeyInvalid, idemhttp.TypeTenantInvalid,
		idemhttp.TypeRequestInvalid, idemhttp.TypeBodyTooLarge, idemhttp.TypeUnavailable:
		// Refused before anything ran, and the key deduplicates any
		// earlier call: the next attempt may run.
		return "", 0, &providerError{Status: p.Status, apiError: apiError{Code: "refused", Message: p.Detail}}
	}
	// Needs reconciliation, expired, misconfigured: the provider does not
	// say whether it acted.
	return "", 0, fmt.Errorf("provider answered %d: %s", p.Status, p.Detail)
}
