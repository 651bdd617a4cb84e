package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
)

// providerCall is one POST to the provider's action endpoint.
type providerCall struct {
	tenant, tool, key string
	body              string
	fault             string
	timeout           time.Duration
}

type providerReply struct {
	status   int
	replayed string
	body     map[string]any
}

func startProvider(t *testing.T) *demo.Provider {
	t.Helper()
	p, err := demo.StartProvider()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	require.True(t, strings.HasPrefix(p.URL(), "http://127.0.0.1:"), p.URL())
	return p
}

func (c providerCall) do(t *testing.T, p *demo.Provider) (providerReply, error) {
	t.Helper()
	timeout := c.timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL()+"/v1/"+c.tool, bytes.NewBufferString(c.body))
	require.NoError(t, err)
	if c.tenant != "" {
		req.Header.Set(demo.TenantHeader, c.tenant)
	}
	if c.key != "" {
		req.Header.Set(demo.IdempotencyKeyHeader, c.key)
	}
	if c.fault != "" {
		req.Header.Set(demo.FaultHeader, c.fault)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return providerReply{}, err
	}
	defer resp.Body.Close()
	r := providerReply{status: resp.StatusCode, replayed: resp.Header.Get(demo.ReplayedHeader)}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r.body))
	return r, nil
}

// lookup asks the provider's lookup endpoint about an identity.
func lookup(t *testing.T, baseURL string, id ops.Identity) (found bool, ref string) {
	t.Helper()
	url := baseURL + strings.NewReplacer("{tenant}", id.Tenant, "{tool}", id.Tool, "{key}", id.Key).Replace(demo.LookupPath)
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Found *bool  `json:"found"`
		Ref   string `json:"ref"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.NotNil(t, body.Found, "the answer always says found or not")
	if *body.Found {
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotEmpty(t, body.Ref)
	} else {
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Empty(t, body.Ref)
	}
	return *body.Found, body.Ref
}

func TestProvider(t *testing.T) {
	t.Parallel()

	t.Run("HonoursIdempotencyKeys", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		call := providerCall{tenant: "acme", tool: demo.ToolChargeCard, key: "order-1:charge", body: `{"order":"order-1","amount_cents":4200,"card":"tok_visa"}`}
		first, err := call.do(t, p)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, first.status)
		require.Equal(t, "false", first.replayed)
		ref := first.body["ref"].(string)
		require.Regexp(t, `^CH-\d+$`, ref)

		for range 3 {
			again, err := call.do(t, p)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, again.status)
			require.Equal(t, "true", again.replayed)
			require.Equal(t, ref, again.body["ref"], "the same key returns the same reference")
		}
		require.Equal(t, 1, p.Effects(), "a repeated key has no second effect")

		// The key is scoped by tenant and tool.
		other := call
		other.tenant = "globex"
		r, err := other.do(t, p)
		require.NoError(t, err)
		require.NotEqual(t, ref, r.body["ref"])
		require.Equal(t, 2, p.Effects())

		// The same key with another request is refused, and does nothing.
		changed := call
		changed.body = `{"order":"order-1","amount_cents":9900,"card":"tok_visa"}`
		r, err = changed.do(t, p)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnprocessableEntity, r.status)
		require.Equal(t, "idempotency_key_reused", r.body["code"])
		require.Equal(t, 2, p.Effects())

		got, ok := p.Effect(ops.Identity{Tenant: "acme", Tool: demo.ToolChargeCard, Key: "order-1:charge"})
		require.True(t, ok)
		require.Equal(t, ref, got)
	})

	t.Run("AnswersLookupsByKey", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		id := ops.Identity{Tenant: "initech", Tool: demo.ToolSendEmail, Key: "run-7:notify"}
		found, _ := lookup(t, p.URL(), id)
		require.False(t, found)

		r, err := providerCall{tenant: id.Tenant, tool: id.Tool, key: id.Key, body: `{"to":"a@b.example"}`}.do(t, p)
		require.NoError(t, err)
		found, ref := lookup(t, p.URL(), id)
		require.True(t, found)
		require.Equal(t, r.body["ref"], ref)
		require.Regexp(t, `^MSG-\d+$`, ref)

		found, _ = lookup(t, p.URL(), ops.Identity{Tenant: "acme", Tool: id.Tool, Key: id.Key})
		require.False(t, found, "another tenant's key is another operation")
	})

	// The catalog's lookup, as opsdesk sends it, is answered for the
	// exact identity: a key of .. is not a dot segment the mux cleans
	// away (a redirect, then a 404 that reads as "not found").
	t.Run("AnswersExactLookupURLs", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		spec := reconcile.LookupSpec{URL: p.URL() + demo.LookupPath, ResultRef: "/ref"}
		ask := func(tenant, key string) reconcile.Answer {
			return reconcile.Ask(t.Context(), http.DefaultClient, spec, tenant, demo.ToolChargeCard, key)
		}
		_, err := providerCall{tenant: "acme", tool: demo.ToolChargeCard, key: "b", body: `{"card":"tok_visa"}`}.do(t, p)
		require.NoError(t, err)
		// Keys a header can carry (the provider takes keys in a header).
		for _, key := range []string{"..", ".", "a/../b", "../b", "x&tenant=globex", "%2e%2e", "%2F", "?", "#", "a b", "a+b", "x;y=1", "ключ-ü"} {
			a := ask("acme", key)
			require.Equal(t, reconcile.LookupNotFound, a.Evidence.Lookup, "%q before the call: %s", key, a.Evidence.Summary)
			r, err := providerCall{tenant: "acme", tool: demo.ToolChargeCard, key: key, body: `{"card":"tok_visa"}`}.do(t, p)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, r.status, key)
			a = ask("acme", key)
			require.Equal(t, reconcile.LookupFound, a.Evidence.Lookup, "%q: %s", key, a.Evidence.Summary)
			require.Equal(t, r.body["ref"], a.Evidence.Ref, key)
			a = ask("..", key)
			require.Equal(t, reconcile.LookupNotFound, a.Evidence.Lookup, "tenant .. with %q: %s", key, a.Evidence.Summary)
		}
	})

	t.Run("RefusesCallsWithoutKeyOrTenant", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		for _, c := range []providerCall{
			{tenant: "acme", tool: demo.ToolSendEmail, body: `{}`},
			{key: "k", tool: demo.ToolSendEmail, body: `{}`},
			{tenant: "acme", key: "k", tool: demo.ToolSendEmail, body: `{}`, fault: "explode"},
		} {
			r, err := c.do(t, p)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, r.status)
		}
		require.Zero(t, p.Effects())
	})

	t.Run("BusinessRefusalsDoNothing", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		r, err := providerCall{tenant: "acme", tool: demo.ToolChargeCard, key: "k1", body: `{"card":"tok_declined"}`}.do(t, p)
		require.NoError(t, err)
		require.Equal(t, http.StatusPaymentRequired, r.status)
		require.Equal(t, "card_declined", r.body["code"])
		r, err = providerCall{tenant: "acme", tool: demo.ToolDeployService, key: "k2", body: `{"version":"v2.0.0-rc1","environment":"prod"}`}.do(t, p)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnprocessableEntity, r.status)
		require.Zero(t, p.Effects())
	})

	t.Run("FaultUnavailableActsNever", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		c := providerCall{tenant: "acme", tool: demo.ToolDeployService, key: "rel-1", body: `{"version":"v1","environment":"prod"}`, fault: demo.FaultUnavailable}
		r, err := c.do(t, p)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.Equal(t, false, r.body["applied"])
		found, _ := lookup(t, p.URL(), ops.Identity{Tenant: "acme", Tool: demo.ToolDeployService, Key: "rel-1"})
		require.False(t, found)
	})

	t.Run("FaultLoseResponseActsThenTimesOut", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		id := ops.Identity{Tenant: "acme", Tool: demo.ToolChargeCard, Key: "order-2:charge"}
		c := providerCall{tenant: id.Tenant, tool: id.Tool, key: id.Key, body: `{"card":"tok_visa"}`, fault: demo.FaultLoseResponse, timeout: 300 * time.Millisecond}
		_, err := c.do(t, p)
		require.True(t, errors.Is(err, context.DeadlineExceeded), "the caller sees a timeout: %v", err)
		found, ref := lookup(t, p.URL(), id)
		require.True(t, found, "the provider acted although nobody saw its answer")

		// A retry with the key learns the reference without a second effect.
		c.fault, c.timeout = "", 0
		r, err := c.do(t, p)
		require.NoError(t, err)
		require.Equal(t, ref, r.body["ref"])
		require.Equal(t, "true", r.replayed)
		require.Equal(t, 1, p.Effects())
	})

	t.Run("FaultTimeoutBeforeActing", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		id := ops.Identity{Tenant: "acme", Tool: demo.ToolDeployService, Key: "rel-2"}
		c := providerCall{tenant: id.Tenant, tool: id.Tool, key: id.Key, body: `{"version":"v1","environment":"staging"}`,
			fault: demo.FaultTimeoutBeforeActing, timeout: 300 * time.Millisecond}
		_, err := c.do(t, p)
		require.True(t, errors.Is(err, context.DeadlineExceeded), "the caller sees a timeout: %v", err)
		found, _ := lookup(t, p.URL(), id)
		require.False(t, found)
		require.Zero(t, p.Effects())
	})

	t.Run("FaultSlowActsLate", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		id := ops.Identity{Tenant: "acme", Tool: demo.ToolSendEmail, Key: "run-9:notify"}
		c := providerCall{tenant: id.Tenant, tool: id.Tool, key: id.Key, body: `{}`, fault: demo.FaultSlow + "=200ms"}
		r, err := c.do(t, p)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.status)
		found, ref := lookup(t, p.URL(), id)
		require.True(t, found)
		require.Equal(t, r.body["ref"], ref)
	})

	t.Run("CloseAbortsHeldCalls", func(t *testing.T) {
		t.Parallel()
		p, err := demo.StartProvider()
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, p.URL()+"/v1/"+demo.ToolChargeCard, strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set(demo.TenantHeader, "acme")
		req.Header.Set(demo.IdempotencyKeyHeader, "k")
		req.Header.Set(demo.FaultHeader, demo.FaultTimeoutBeforeActing)
		errc := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req) // no timeout: only Close ends it
			if err == nil {
				resp.Body.Close()
				err = errors.New("the held call was answered")
			}
			errc <- err
		}()
		require.Eventually(t, func() bool { return p.Holding() == 1 }, 20*time.Second, 5*time.Millisecond)
		require.NoError(t, p.Close())
		require.Error(t, <-errc, "the held call is dropped without an answer")
		require.Zero(t, p.Holding())
		require.Zero(t, p.Effects())
		require.NoError(t, p.Close(), "closing twice is harmless")
	})
}
