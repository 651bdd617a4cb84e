package lookupurl_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/lookupurl"
)

// hostile are keys that an HTTP stack could read as another identity if
// they were not encoded exactly.
var hostile = []string{
	"..", ".", "...", "a/../b", "../../admin", "x&tenant=globex", "x;jsessionid=1", "%2e%2e", "%2F", "?", "#", "#frag",
	"a b", "a+b", " ", "\t", "ключ-ü-鍵", "\x00", "\x1b[2J", "\r\nHost: evil", "\xff\xfe", "{key}", "{tenant}", "~-._",
}

func TestBuildIsExact(t *testing.T) {
	t.Parallel()
	path, err := lookupurl.Parse("https://p.example:8443/v1/{tenant}/{tool}/{key}?token=sekrit")
	require.NoError(t, err)
	query, err := lookupurl.Parse("https://p.example/charges?tenant={tenant}&tool={tool}&key={key}")
	require.NoError(t, err)
	for _, key := range hostile {
		v := lookupurl.Values{Tenant: "acme", Tool: "charge-card", Key: key}

		got, err := path.Build(v)
		require.NoError(t, err, "%q", key)
		u, err := url.Parse(got)
		require.NoError(t, err, "%q: %s", key, got)
		require.Equal(t, "p.example:8443", u.Host, "%q", key)
		require.Empty(t, u.Fragment, "%q", key)
		require.Equal(t, "token=sekrit", u.RawQuery, "%q", key)
		segs := strings.Split(u.EscapedPath(), "/")
		require.Len(t, segs, 5, "%q: %s", key, got)
		for _, seg := range segs[1:] {
			require.NotContains(t, []string{".", ".."}, seg, "%q: a dot segment %s", key, got)
		}
		back, err := url.PathUnescape(segs[4])
		require.NoError(t, err)
		require.Equal(t, key, back, "%q: %s", key, got)

		got, err = query.Build(v)
		require.NoError(t, err, "%q", key)
		u, err = url.Parse(got)
		require.NoError(t, err, "%q: %s", key, got)
		require.Equal(t, "/charges", u.Path)
		q, err := url.ParseQuery(u.RawQuery)
		require.NoError(t, err, "%q: %s", key, got)
		require.Equal(t, url.Values{"tenant": {"acme"}, "tool": {"charge-card"}, "key": {key}}, q, "%q: %s", key, got)
	}

	// Dot segments are encoded wherever a value makes one, also with the
	// template's own characters around it.
	dots, err := lookupurl.Parse("http://p/{tenant}/.{key}/{tool}")
	require.NoError(t, err)
	got, err := dots.Build(lookupurl.Values{Tenant: "..", Tool: ".", Key: "."})
	require.NoError(t, err)
	require.Equal(t, "http://p/%2E%2E/%2E%2E/%2E", got)
	got, err = dots.Build(lookupurl.Values{Tenant: "a.b", Tool: "x", Key: "k.."})
	require.NoError(t, err)
	require.Equal(t, "http://p/a.b/.k../x", got, "dots elsewhere stay as they are")
}

func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	tmpl, err := lookupurl.Parse("https://p/{tenant}/{key}?tool={tool}")
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		v    lookupurl.Values
		want string
	}{
		"EmptyKeyInPath":    {lookupurl.Values{Tenant: "acme", Key: ""}, "the key is empty"},
		"EmptyTenantInPath": {lookupurl.Values{Tenant: "", Key: "k"}, "the tenant is empty"},
		"HugeKey":           {lookupurl.Values{Tenant: "acme", Key: strings.Repeat("k", 32<<20)}, "the key is 33554432 bytes"},
		"KeyJustOver":       {lookupurl.Values{Tenant: "acme", Key: strings.Repeat("k", lookupurl.MaxLen+1)}, "the key is 8193 bytes"},
		"EscapedTooLong":    {lookupurl.Values{Tenant: "acme", Key: strings.Repeat("/", 3000)}, "over the 8192"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := tmpl.Build(tc.v)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, got)
			require.NotContains(t, err.Error(), "kkkk", "the value stays out of the message")
		})
	}
	// An empty value in the query is exact: key= is the empty key.
	got, err := tmpl.Build(lookupurl.Values{Tenant: "acme", Key: "k"})
	require.NoError(t, err)
	require.Equal(t, "https://p/acme/k?tool=", got)
}

func TestParse(t *testing.T) {
	t.Parallel()
	for tmpl, want := range map[string]string{
		"":                              "empty",
		"p.example/{key}":               "not an absolute http or https URL",
		"ftp://p/{key}":                 "not an http or https URL",
		"https://p/charges":             "no {key} or {provider_key}",
		"https://p/{tenant}/{tool}":     "no {key} or {provider_key}",
		"https://{provider_key}.p/x":    "scheme or the host",
		"https://p/x#{provider_key}":    "fragment",
		"https://p/{providerkey}":       "unknown placeholder {providerkey}",
		"https://{key}.p/x":             "scheme or the host",
		"https://p:{key}/x":             "scheme or the host",
		"https://{tenant}@p/{key}":      "scheme or the host",
		"{tool}://p/{key}":              "scheme or the host",
		"https://p/x#{key}":             "fragment",
		"https://p/x?k={key}#{tenant}":  "fragment",
		"https://p/{id}/{key}":          "unknown placeholder {id}",
		"https://p/{KEY}":               "unknown placeholder {KEY}",
		"https://p/{key":                "without its }",
		"https://p/x/{key}\x7f":         "not a URL",
		"https:///{key}":                "no host",
		"https://p/c?key={key}&t={ten}": "unknown placeholder {ten}",
	} {
		_, err := lookupurl.Parse(tmpl)
		require.ErrorContains(t, err, want, "%q", tmpl)
	}
	for _, ok := range []string{
		"http://127.0.0.1:4242/lookup/{tenant}/{tool}/{key}",
		"https://user:pw@p.example/v1/charges?key={key}&tenant={tenant}",
		"https://[::1]:8443/{key}",
		"https://p/{tenant}-{tool}-{key}.json#top",
		"http://127.0.0.1:4242/lookup/{tenant}/{tool}/{provider_key}",
		"https://p/charges?idempotency_key={provider_key}",
	} {
		_, err := lookupurl.Parse(ok)
		require.NoError(t, err, ok)
	}
}

func TestBuildProviderKey(t *testing.T) {
	t.Parallel()
	path, err := lookupurl.Parse("https://p/lookup/{tenant}/{tool}/{provider_key}")
	require.NoError(t, err)
	query, err := lookupurl.Parse("https://p/charges?key={provider_key}&raw={key}")
	require.NoError(t, err)
	v := lookupurl.Values{Tenant: "acme", Tool: "charge-card", Key: "../x&y", ProviderKey: "opsdesk1_abc"}
	got, err := path.Build(v)
	require.NoError(t, err)
	require.Equal(t, "https://p/lookup/acme/charge-card/opsdesk1_abc", got)
	got, err = query.Build(v)
	require.NoError(t, err)
	require.Equal(t, "https://p/charges?key=opsdesk1_abc&raw=..%2Fx%26y", got)

	// A provider key is never empty: an empty one was never derived, and
	// a lookup for it would ask about no operation.
	for _, tmpl := range []*lookupurl.Template{path, query} {
		v.ProviderKey = ""
		got, err = tmpl.Build(v)
		require.ErrorContains(t, err, "the provider_key is empty")
		require.Empty(t, got)
	}
}

func TestEscape(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ord-1.5_x~", lookupurl.Escape("ord-1.5_x~"))
	require.Equal(t, "a%2Fb%3Fc%23d%26e%3Df%3Bg%2Bh%20i%25j", lookupurl.Escape("a/b?c#d&e=f;g+h i%j"))
	require.Equal(t, "%D0%BA%1B%00%FF", lookupurl.Escape("к\x1b\x00\xff"))
}
