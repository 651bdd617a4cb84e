package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/opsdesk/opsdesk/ops"
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

// act asks the provider to apply intent under id's key, with an optional
// simulated fault, waiting at most timeout. It returns the provider's
// reference; a *providerError when the provider answered without acting;
// and any other error when nobody knows whether it acted.
func (c *providerClient) act(ctx context.Context, id ops.Identity, intent any, fault string, timeout time.Duration) (string, error) {
	body, err := json.Marshal(intent)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/"+url.PathEscape(id.Tool), bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(TenantHeader, id.Tenant)
	req.Header.Set(IdempotencyKeyHeader, id.Key)
	if fault != "" {
		req.Header.Set(FaultHeader, fault)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("call the provider: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", fmt.Errorf("read the provider's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		perr := &providerError{Status: resp.StatusCode}
		if err := json.Unmarshal(raw, &perr.apiError); err != nil {
			// Not the provider's own answer: nothing says it did not act.
			return "", fmt.Errorf("provider answered %s with an unreadable body", resp.Status)
		}
		return "", perr
	}
	var ans actionAnswer
	if err := json.Unmarshal(raw, &ans); err != nil || ans.Ref == "" {
		return "", fmt.Errorf("provider answered 200 without a reference")
	}
	return ans.Ref, nil
}
