package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/internal/demo"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
	"github.com/opsdesk/opsdesk/reconcile"
)

// providerCall is one POST to the provider's action endpoint. The key is
// sent as the draft's quoted string, or as it is when rawKey.
type providerCall struct {
	tenant, tool, key string
	rawKey            bool
	body              string
	fault             string
	timeout           time.Duration
}

type providerReply struct {
	status      int
	replayed    string
	contentType string
	raw         []byte
	body        map[string]any
}

// startProvider starts a provider over an operation store of its own.
func startProvider(t *testing.T) *demo.Provider {
	t.Helper()
	p, err := demo.StartProvider(demo.ProviderConfig{Pool: dbtest.New(t).Service})
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
	req.Header.Set("Content-Type", "application/json")
	if c.tenant != "" {
		req.Header.Set(demo.TenantHeader, c.tenant)
	}
	if c.key != "" {
		key := c.key
		if !c.rawKey {
			key, err = idemhttp.FormatKey(c.key)
			require.NoError(t, err)
		}
		req.Header.Set(demo.IdempotencyKeyHeader, key)
	}
	if c.fault != "" {
		req.Header.Set(demo.FaultHeader, c.fault)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return providerReply{}, err
	}
	defer resp.Body.Close()
	r := providerReply{status: resp.StatusCode, replayed: resp.Header.Get(demo.ReplayedHeader), contentType: resp.Header.Get("Content-Type")}
	r.raw, err = io.ReadAll(resp.Body)
	if err != nil {
		return providerReply{}, err
	}
	require.NoError(t, json.Unmarshal(r.raw, &r.body), "%s", r.raw)
	return r, nil
}

// untilAnswered makes the call again while the provider says an earlier
// call with the key is still being handled (the draft's 409).
func (c providerCall) untilAnswered(t *testing.T, p *demo.Provider) providerReply {
	t.Helper()
	var r providerReply
	require.Eventually(t, func() bool {
		var err error
		r, err = c.do(t, p)
		require.NoError(t, err)
		return r.status != http.StatusConflict
	}, 20*time.Second, 20*time.Millisecond)
	return r
}

// lookup asks the provider's lookup endpoint about an identity as the
// provider knows it (the key is the one it was sent).
func lookup(t *testing.T, baseURL string, id ops.Identity) (found bool, ref string) {
	t.Helper()
	url := baseURL + strings.NewReplacer("{tenant}", id.Tenant, "{tool}", id.Tool, "{provider_key}", id.Key).Replace(demo.LookupPath)
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
		require.Empty(t, first.replayed)
		ref := first.body["ref"].(string)
		require.Regexp(t, `^CH-\d+$`, ref)

		for _, again := range []providerCall{call, {tenant: call.tenant, tool: call.tool, key: call.key, rawKey: true,
			body: `{"card":"tok_visa", "amount_cents": 4200, "order": "order-1"}`}} {
			again, err := again.do(t, p)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, again.status)
			require.Equal(t, "true", again.replayed)
			require.Equal(t, first.raw, again.raw, "the same key replays the first answer byte for byte")
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
		require.Equal(t, idemhttp.ProblemContentType, r.contentType)
		require.Equal(t, idemhttp.TypeKeyReused, r.body["type"])
		require.Equal(t, false, r.body["retry_with_same_key"])
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
	// exact identity: the provider key the fleet sent for it, under a
	// tenant of .. that is not a dot segment the mux cleans away (a
	// redirect, then a 404 that reads as "not found").
	t.Run("AnswersExactLookupURLs", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		spec := reconcile.LookupSpec{URL: p.URL() + demo.LookupPath, ResultRef: "/ref"}
		ask := func(tenant, key string) reconcile.Answer {
			return reconcile.Ask(t.Context(), http.DefaultClient, spec, tenant, demo.ToolChargeCard, key)
		}
		providerKey := func(key string) string {
			return ops.Identity{Tenant: "acme", Tool: demo.ToolChargeCard, Key: key}.ProviderKey()
		}
		_, err := providerCall{tenant: "acme", tool: demo.ToolChargeCard, key: providerKey("b"), body: `{"card":"tok_visa"}`}.do(t, p)
		require.NoError(t, err)
		for _, key := range []string{"..", ".", "a/../b", "../b", "x&tenant=globex", "%2e%2e", "%2F", "?", "#", "a b", "a+b", "x;y=1", `a"b\c`, "\x00", "ключ"} {
			a := ask("acme", key)
			require.Equal(t, reconcile.LookupNotFound, a.Evidence.Lookup, "%q before the call: %s", key, a.Evidence.Summary)
			r, err := providerCall{tenant: "acme", tool: demo.ToolChargeCard, key: providerKey(key), body: `{"card":"tok_visa"}`}.do(t, p)
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
			{tenant: "acme", key: `"a", "b"`, rawKey: true, tool: demo.ToolSendEmail, body: `{}`},
			{tenant: "acme", key: "ключ-ü", rawKey: true, tool: demo.ToolSendEmail, body: `{}`},
			{tenant: "acme", key: strings.Repeat("k", 256), tool: demo.ToolSendEmail, body: `{}`, rawKey: true},
		} {
			r, err := c.do(t, p)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, r.status, "%+v: %s", c, r.raw)
		}
		require.Zero(t, p.Effects())
	})

	// The draft's answers: 400 problems for a missing or malformed key,
	// 409 while a call with the key runs.
	t.Run("AnswersByTheDraft", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t)
		r, err := providerCall{tenant: "acme", tool: demo.ToolChargeCard, body: `{}`}.do(t, p)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, r.status)
		require.Equal(t, idemhttp.ProblemContentType, r.contentType)
		require.Equal(t, idemhttp.TypeKeyMissing, r.body["type"])

		slow := providerCall{tenant: "acme", tool: demo.ToolDeployService, key: "rel-9", body: `{"version":"v1","environment":"prod"}`, fault: demo.FaultSlow + "=6s"}
		done := make(chan providerReply, 1)
		go func() {
			r, err := slow.do(t, p)
			if err != nil {
				r.status = -1
			}
			done <- r
		}()
		// The slow call holds its key before anyone asks again: asked
		// first, the second call would run and the slow one replay it.
		require.Eventually(t, func() bool { return p.Holding() == 1 }, 20*time.Second, 5*time.Millisecond)
		var busy providerReply
		require.Eventually(t, func() bool {
			var err error
			busy, err = providerCall{tenant: "acme", tool: demo.ToolDeployService, key: "rel-9", body: `{"version":"v1","environment":"prod"}`}.do(t, p)
			require.NoError(t, err)
			return busy.status == http.StatusConflict
		}, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, idemhttp.TypeInProgress, busy.body["type"])
		require.Equal(t, true, busy.body["retry_with_same_key"])
		first := <-done
		require.Equal(t, http.StatusOK, first.status)
		require.Equal(t, 1, p.Effects())
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

		// A retry with the key learns the reference without a second
		// effect: the abandoned call's outcome was unknown, so the retry
		// runs the action again, which finds its effect.
		c.fault, c.timeout = "", 0
		r := c.untilAnswered(t, p)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, ref, r.body["ref"])
		require.Equal(t, 1, p.Effects())
		again, err := c.do(t, p)
		require.NoError(t, err)
		require.Equal(t, "true", again.replayed, "that answer is stored now")
		require.Equal(t, r.raw, again.raw)
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
		p, err := demo.StartProvider(demo.ProviderConfig{Pool: dbtest.New(t).Service})
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
