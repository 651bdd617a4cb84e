package reconcile_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/reconcile"
)

func TestAsk(t *testing.T) {
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
