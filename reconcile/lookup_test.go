package reconcile_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/reconcile"
)

func TestLookupAsk(t *testing.T) {
	t.Parallel()
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.EscapedPath())
		switch {
		case strings.HasPrefix(r.URL.Path, "/slow/"):
			time.Sleep(200 * time.Millisecond)
		case r.URL.Path == "/c/acme/ord-1":
			fmt.Fprint(w, `{"found": true, "charge": {"id": "ch_123", "amount": 100}}`)
		case r.URL.Path == "/c/acme/ord-2":
			w.WriteHeader(http.StatusNotFound)
		case r.URL.Path == "/c/acme/ord-3":
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/c/acme/ord-4":
			fmt.Fprint(w, `<html>found</html>`)
		case r.URL.Path == "/c/acme/run/42 x":
			fmt.Fprint(w, `{"charge": {"id": 42}}`)
		default:
			t.Errorf("unexpected path %q", r.URL.Path)
		}
	}))
	defer srv.Close()
	spec := reconcile.LookupSpec{URL: srv.URL + "/c/{tenant}/{key}", ResultRef: "/charge/id", Timeout: time.Second}
	host := strings.TrimPrefix(srv.URL, "http://")

	a := reconcile.Ask(t.Context(), srv.Client(), spec, "acme", "charge-card", "ord-1")
	require.NoError(t, a.Err)
	require.Equal(t, reconcile.LookupFound, a.Evidence.Lookup)
	require.Equal(t, "ch_123", a.ResultRef)
	require.Regexp(t, `^HTTP 200 from `+host+` in (<1ms|[0-9.]+m?s): found, reference ch_123$`, a.Evidence.Summary)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, a.Evidence.Digest)
	require.NotContains(t, a.Evidence.Summary, "amount", "the body stays out of the summary")

	a = reconcile.Ask(t.Context(), srv.Client(), spec, "acme", "charge-card", "ord-2")
	require.NoError(t, a.Err)
	require.Equal(t, reconcile.LookupNotFound, a.Evidence.Lookup)
	require.Contains(t, a.Evidence.Summary, "HTTP 404")

	a = reconcile.Ask(t.Context(), srv.Client(), spec, "acme", "charge-card", "ord-3")
	require.Error(t, a.Err)
	require.Equal(t, reconcile.LookupNone, a.Evidence.Lookup, "a 503 is no answer")
	require.Contains(t, a.Evidence.Summary, "neither found (200) nor not found (404)")

	a = reconcile.Ask(t.Context(), srv.Client(), spec, "acme", "charge-card", "ord-4")
	require.Equal(t, reconcile.LookupFound, a.Evidence.Lookup, "the status is the answer")
	require.Empty(t, a.ResultRef)
	require.Contains(t, a.Evidence.Summary, "no reference: the body is not JSON")

	// Values are path-escaped; a number is a reference too.
	a = reconcile.Ask(t.Context(), srv.Client(), spec, "acme", "charge-card", "run/42 x")
	require.Equal(t, "42", a.ResultRef)
	require.Contains(t, paths, "/c/acme/run%2F42%20x")

	slow := spec
	slow.URL = srv.URL + "/slow/{key}?token=sekrit"
	slow.Timeout = 20 * time.Millisecond
	a = reconcile.Ask(t.Context(), srv.Client(), slow, "acme", "charge-card", "ord-1")
	require.Error(t, a.Err)
	require.Equal(t, reconcile.LookupNone, a.Evidence.Lookup)
	require.Contains(t, a.Evidence.Summary, "no answer from "+host)
	require.NotContains(t, a.Evidence.Summary, "sekrit", "the URL may carry a token")

	srv.Close()
	a = reconcile.Ask(t.Context(), http.DefaultClient, spec, "acme", "charge-card", "ord-1")
	require.Error(t, a.Err)
	require.Contains(t, a.Evidence.Summary, "connection refused")
}

// hostileKeys are keys a lookup URL must carry exactly: an HTTP stack
// reads each of them, unencoded, as another identity or as none.
var hostileKeys = []string{
	"..", ".", "a/../b", "../charge-card/ord-1", "x&tenant=globex", "%2e%2e", "%2F", "?", "#", "a b", "a+b",
	"x;jsessionid=1", "ключ-ü-鍵", "\x1b[2J\a", "\x00", "tab\there", "line\r\nbreak", "\u009b31m", "\xff",
}

// provider is an httptest provider on net/http's ServeMux, which cleans
// dot segments by redirecting to the cleaned path, as many stacks do. It
// has acted for the identities in acted and answers 200 with the
// identity it understood, or 404; seen records every request it got.
type provider struct {
	srv   *httptest.Server
	mu    sync.Mutex
	acted map[[3]string]bool
	seen  []string
}

func newProvider(t *testing.T) *provider {
	t.Helper()
	p := &provider{acted: map[[3]string]bool{}}
	answer := func(w http.ResponseWriter, id [3]string) {
		p.mu.Lock()
		ok := p.acted[id]
		p.mu.Unlock()
		if !ok {
			http.Error(w, `{"found":false}`, http.StatusNotFound)
			return
		}
		// Hex: the reference carries the identity's bytes, whatever they are.
		body, _ := json.Marshal(map[string]any{"ref": "REF:" + hex.EncodeToString([]byte(strings.Join(id[:], "|")))})
		_, _ = w.Write(body)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /path/{tenant}/{tool}/{key}", func(w http.ResponseWriter, r *http.Request) {
		answer(w, [3]string{r.PathValue("tenant"), r.PathValue("tool"), r.PathValue("key")})
	})
	mux.HandleFunc("GET /query", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if len(q["tenant"]) != 1 || len(q["tool"]) != 1 || len(q["key"]) != 1 {
			http.Error(w, "one tenant, tool and key", http.StatusBadRequest)
			return
		}
		answer(w, [3]string{q.Get("tenant"), q.Get("tool"), q.Get("key")})
	})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.URL.RequestURI())
		p.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) act(tenant, tool, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acted[[3]string{tenant, tool, key}] = true
}

func (p *provider) requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

// TestLookupExactURLs: against a provider that normalises dot segments,
// every hostile key is asked about exactly: a key the provider acted on
// is found with its own reference, never read as not found; a key it did
// not act on is never found for another identity that it did; values in
// a query cannot add parameters.
func TestLookupExactURLs(t *testing.T) {
	t.Parallel()
	for name, tmpl := range map[string]string{
		"Path":  "/path/{tenant}/{tool}/{key}",
		"Query": "/query?tenant={tenant}&tool={tool}&key={key}",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t)
			p.act("globex", "charge-card", "x") // what x&tenant=globex would smuggle
			p.act("acme", "charge-card", "b")   // what a/../b would normalise to
			p.act("acme", "charge-card", "ord-1")
			spec := reconcile.LookupSpec{URL: p.srv.URL + tmpl, ResultRef: "/ref"}
			for _, key := range hostileKeys {
				// Not acted on: never found (another identity's answer).
				a := reconcile.Ask(t.Context(), p.srv.Client(), spec, "acme", "charge-card", key)
				require.NotEqual(t, reconcile.LookupFound, a.Evidence.Lookup, "%q: %s", key, a.Evidence.Summary)
			}
			for _, key := range hostileKeys {
				p.act("acme", "charge-card", key)
				a := reconcile.Ask(t.Context(), p.srv.Client(), spec, "acme", "charge-card", key)
				require.Equal(t, reconcile.LookupFound, a.Evidence.Lookup, "%q: %s", key, a.Evidence.Summary)
				require.Equal(t, "REF:"+hex.EncodeToString([]byte("acme|charge-card|"+key)), a.Evidence.Ref,
					"%q: the provider answered for this identity", key)
			}
		})
	}
	t.Run("HostileTenantAndTool", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t)
		p.act("..", ".", "a/../b")
		spec := reconcile.LookupSpec{URL: p.srv.URL + "/path/{tenant}/{tool}/{key}"}
		a := reconcile.Ask(t.Context(), p.srv.Client(), spec, "..", ".", "a/../b")
		require.Equal(t, reconcile.LookupFound, a.Evidence.Lookup, a.Evidence.Summary)
	})
}

// TestLookupByProviderKey: a provider that was sent the provider key
// (ops.Identity.ProviderKey) knows the operation by it alone; the lookup
// asks for the same key, so two tenants' equal raw keys are told apart.
func TestLookupByProviderKey(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	acme := ops.Identity{Tenant: "acme", Tool: "charge-card", Key: "ord-1"}
	// One provider account for every tenant: the provider's own tenant
	// and tool are the account's.
	p.act("shared", "charges", acme.ProviderKey())
	spec := reconcile.LookupSpec{URL: p.srv.URL + "/path/shared/charges/{provider_key}", ResultRef: "/ref"}
	a := reconcile.Ask(t.Context(), p.srv.Client(), spec, acme.Tenant, acme.Tool, acme.Key)
	require.Equal(t, reconcile.LookupFound, a.Evidence.Lookup, a.Evidence.Summary)
	require.Equal(t, "REF:"+hex.EncodeToString([]byte("shared|charges|"+acme.ProviderKey())), a.ResultRef)

	// Globex's ord-1 is another operation: not found, though the raw keys
	// are equal.
	a = reconcile.Ask(t.Context(), p.srv.Client(), spec, "globex", "charge-card", "ord-1")
	require.Equal(t, reconcile.LookupNotFound, a.Evidence.Lookup, a.Evidence.Summary)
	for _, key := range hostileKeys {
		a = reconcile.Ask(t.Context(), p.srv.Client(), spec, "acme", "charge-card", key)
		require.Equal(t, reconcile.LookupNotFound, a.Evidence.Lookup, "%q: %s", key, a.Evidence.Summary)
	}
}

// TestLookupRefusesInexactURLs: a URL that cannot name the identity is
// not sent, and is no answer.
func TestLookupRefusesInexactURLs(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	spec := reconcile.LookupSpec{URL: p.srv.URL + "/path/{tenant}/{tool}/{key}"}
	for name, key := range map[string]string{"Huge": strings.Repeat("k", 32<<20), "Empty": ""} {
		a := reconcile.Ask(t.Context(), p.srv.Client(), spec, "acme", "charge-card", key)
		require.Equal(t, reconcile.LookupNone, a.Evidence.Lookup, name)
		require.Error(t, a.Err, name)
		require.Contains(t, a.Evidence.Summary, "no exact lookup URL for this operation", name)
		require.Less(t, len(a.Evidence.Summary), 200, name)
	}
	for _, tmpl := range []string{"http://{tenant}.p/{key}", "http://p/x#{key}", "http://p/{id}/{key}"} {
		a := reconcile.Ask(t.Context(), p.srv.Client(), reconcile.LookupSpec{URL: tmpl}, "acme", "charge-card", "k")
		require.Equal(t, reconcile.LookupNone, a.Evidence.Lookup, tmpl)
		require.Contains(t, a.Evidence.Summary, "lookup URL template", tmpl)
	}
	require.Zero(t, p.requests(), "nothing was sent")
}

// TestLookupRedirectIsNoAnswer: a redirect is not followed; the provider
// did not answer for this exact URL. A raw .. shows why: ServeMux
// redirects it to the cleaned path, whose 404 would read as not found.
func TestLookupRedirectIsNoAnswer(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	spec := reconcile.LookupSpec{URL: p.srv.URL + "/path/acme/charge-card/x/../{key}", NotFoundStatus: http.StatusNotFound}
	p.act("acme", "charge-card", "k")
	a := reconcile.Ask(t.Context(), p.srv.Client(), spec, "acme", "charge-card", "k")
	require.Equal(t, reconcile.LookupNone, a.Evidence.Lookup, a.Evidence.Summary)
	require.Regexp(t, `^HTTP 307 from 127\.0\.0\.1:\d+ in \S+: a redirect, which is no answer`, a.Evidence.Summary)
	require.Equal(t, 1, p.requests(), "the redirect was not followed")

	// Even with a caller's client that follows redirects.
	follows := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
	a = reconcile.Ask(t.Context(), follows, spec, "acme", "charge-card", "k")
	require.Equal(t, reconcile.LookupNone, a.Evidence.Lookup, a.Evidence.Summary)
	require.Equal(t, 2, p.requests())
}
