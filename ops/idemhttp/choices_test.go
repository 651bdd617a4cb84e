package idemhttp_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
)

// members decodes a problem answer's members.
func members(t *testing.T, a answer) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(a.body, &m), "%s", a.body)
	return m
}

// newErr is what idemhttp.New answers opts with, over a fresh store.
func newErr(t *testing.T, opts idemhttp.Config) error {
	t.Helper()
	store, err := ops.New(dbtest.New(t).Service, ops.Config{Tools: map[string]ops.Policy{tool: {Effect: ops.EffectUnknownOutcome}}})
	require.NoError(t, err)
	opts.Tool, opts.Tenant = tool, tenantOf
	_, err = idemhttp.New(store, opts)
	return err
}

// TestProblemChoices: the service chooses the problem types' base URI,
// adds members, and renders the answers itself.
func TestProblemChoices(t *testing.T) {
	t.Parallel()
	const base = "https://api.example.com/docs/idempotency#"

	t.Run("Base", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{opts: idemhttp.Config{ProblemBase: base}})
		a := b.do(t, call{})
		require.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
		require.Equal(t, base+"key-missing", members(t, a)["type"])
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"k"`), body: `{"a":1}`}).status)
		a = b.do(t, call{key: key(`"k"`), body: `{"a":2}`})
		require.Equal(t, http.StatusUnprocessableEntity, a.status)
		require.Equal(t, base+"key-reused", members(t, a)["type"])
	})

	t.Run("BaseRefused", func(t *testing.T) {
		t.Parallel()
		for _, bad := range []string{"problems#", "/docs#", "mailto:ops@example.com", "https://api.example.com/a b#",
			"https://api.example.com/\x00#", "https://api.example.com/é#", "https:///docs#"} {
			require.ErrorContains(t, newErr(t, idemhttp.Config{ProblemBase: bad}), "Config.ProblemBase", "%q", bad)
		}
	})

	t.Run("Members", func(t *testing.T) {
		t.Parallel()
		var seen sync.Map // a name for each type
		b := setup(t, setupOpts{opts: idemhttp.Config{ProblemMembers: func(r *http.Request, p idemhttp.Problem) map[string]any {
			seen.Store(p.Type, p.Name)
			k, _ := idemhttp.ParseKey(r.Header)
			return map[string]any{
				"instance": r.URL.Path, "trace_id": r.Header.Get("X-Trace"), "key": k,
				// Neither may replace a member clients rely on, nor
				// break the answer.
				"status": 999, "type": "about:blank", "retry_with_same_key": true, "bad": make(chan int),
			}
		}}})
		a := b.do(t, call{key: key(`"k"`), path: "/payments/7", body: `{`, header: http.Header{"X-Trace": {"t-1"}}})
		p := problem(t, withoutExtensions(t, a), http.StatusBadRequest, idemhttp.TypeRequestInvalid, false)
		name, _ := seen.Load(idemhttp.TypeRequestInvalid)
		require.Equal(t, "request-invalid", name)
		m := members(t, a)
		require.Equal(t, "/payments/7", m["instance"])
		require.Equal(t, "t-1", m["trace_id"])
		require.Equal(t, "k", m["key"])
		require.NotContains(t, m, "bad")
		require.Equal(t, p.Type, m["type"])
		require.EqualValues(t, http.StatusBadRequest, m["status"])
		require.Equal(t, false, m["retry_with_same_key"])
		require.Regexp(t, `^\{"type":.*"retry_with_same_key":false,"instance":"/payments/7","key":"k","trace_id":"t-1"\}\n$`, string(a.body),
			"the standard members first, then the extensions by name")
	})

	t.Run("Render", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{opts: idemhttp.Config{
			ProblemBase: base,
			Tenant: func(r *http.Request) (string, error) {
				if r.Header.Get(accountHeader) == "Bearer down" {
					return "", &idemhttp.TenantError{Status: http.StatusServiceUnavailable}
				}
				return tenantOf(r)
			},
			ProblemMembers: func(r *http.Request, p idemhttp.Problem) map[string]any { return map[string]any{"trace_id": "t-2"} },
			WriteProblem: func(w http.ResponseWriter, r *http.Request, p idemhttp.Problem) {
				w.Header().Set("Content-Type", "application/vnd.example.error+json")
				w.WriteHeader(p.Status)
				_ = json.NewEncoder(w).Encode(map[string]any{"code": p.Name, "type": p.Type, "retry": p.RetryWithSameKey,
					"after": p.RetryAfter.Seconds(), "trace": p.Extensions["trace_id"]})
			},
		}})
		a := b.do(t, call{apiKey: "Bearer down", key: key(`"k"`)})
		require.Equal(t, http.StatusServiceUnavailable, a.status)
		require.Equal(t, "application/vnd.example.error+json", a.header.Get("Content-Type"))
		require.Equal(t, "1", a.header.Get("Retry-After"), "set before the renderer runs")
		require.Equal(t, "no-store", a.header.Get("Cache-Control"))
		require.Equal(t, map[string]any{"code": "tenant-invalid", "type": base + "tenant-invalid", "retry": true, "after": 1.0, "trace": "t-2"}, members(t, a))
		require.Zero(t, b.records(t))
	})
}

// withoutExtensions is a with only the members of idemhttp.Problem, for
// problem's strict decoding.
func withoutExtensions(t *testing.T, a answer) answer {
	t.Helper()
	var p idemhttp.Problem
	require.NoError(t, json.Unmarshal(a.body, &p))
	body, err := json.Marshal(p)
	require.NoError(t, err)
	a.body = body
	return a
}

// TestKeyFormat: the service's key format, refused with 400 key-invalid
// before anything runs or is recorded.
func TestKeyFormat(t *testing.T) {
	t.Parallel()

	t.Run("MinKeyLength", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{opts: idemhttp.Config{MinKeyLength: 16}})
		p := problem(t, b.do(t, call{key: key(`"abc"`)}), http.StatusBadRequest, idemhttp.TypeKeyInvalid, false)
		require.Contains(t, p.Detail, "at least 16")
		problem(t, b.do(t, call{key: key(strings.Repeat("k", 15))}), http.StatusBadRequest, idemhttp.TypeKeyInvalid, false)
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(strings.Repeat("k", 16))}).status)
		require.EqualValues(t, 1, b.calls.Load())
		require.Equal(t, 1, b.records(t))
	})

	t.Run("UUID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{opts: idemhttp.Config{ValidateKey: idemhttp.UUIDKey}})
		for _, k := range []string{`"pay-1"`, `"8e03978e-40d5-43e8-bc93-6894a57f932"`, `"8e03978e-40d5-43e8-bc93-6894a57f93245"`,
			`"8e03978e_40d5_43e8_bc93_6894a57f9324"`, `"8e03978g-40d5-43e8-bc93-6894a57f9324"`, `"{8e03978e-40d5-43e8-bc93-6894a57f932}"`} {
			p := problem(t, b.do(t, call{key: key(k)}), http.StatusBadRequest, idemhttp.TypeKeyInvalid, false)
			require.Contains(t, p.Detail, "UUIDs", k)
		}
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"8E03978E-40d5-43e8-bc93-6894a57f9324"`)}).status)
		require.EqualValues(t, 1, b.calls.Load())
		require.Equal(t, 1, b.records(t))
	})

	t.Run("HostileReason", func(t *testing.T) {
		t.Parallel()
		var judged atomic.Int64
		b := setup(t, setupOpts{opts: idemhttp.Config{ValidateKey: func(k string) error {
			judged.Add(1)
			return fmt.Errorf("bad\r\nSet-Cookie: x=1\x00\x1b[31m %s", strings.Repeat(k, 1<<20/len(k)))
		}}})
		a := b.do(t, call{key: key(`"abc"`)})
		p := problem(t, a, http.StatusBadRequest, idemhttp.TypeKeyInvalid, false)
		require.Less(t, len(a.body), 1024, "the reason is cut at MaxKeyReasonBytes")
		require.NotRegexp(t, "[\x00-\x1f\x7f]", p.Detail)
		require.Contains(t, p.Detail, "bad  Set-Cookie: x=1")
		require.Empty(t, a.header.Get("Set-Cookie"))

		// A key ParseKey refuses never reaches the hook: not one over
		// 255 bytes, nor a megabyte one.
		problem(t, b.do(t, call{key: key(strings.Repeat("k", 256))}), http.StatusBadRequest, idemhttp.TypeKeyInvalid, false)
		a = b.do(t, call{key: key(strings.Repeat("k", 1<<19))})
		require.Less(t, len(a.body), 2048, "never echoed")
		require.EqualValues(t, 1, judged.Load())
		require.Zero(t, b.calls.Load())
		require.Zero(t, b.records(t))
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		require.ErrorContains(t, newErr(t, idemhttp.Config{MinKeyLength: -1}), "MinKeyLength -1 is negative")
		require.ErrorContains(t, newErr(t, idemhttp.Config{MinKeyLength: 256}), "every key would be refused")
		require.NoError(t, newErr(t, idemhttp.Config{MinKeyLength: 255}))
	})
}

// TestKeyOptional: without a key, a request passes through unprotected;
// with one, it is protected; an invalid one is still refused.
func TestKeyOptional(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{opts: idemhttp.Config{KeyOptional: true, MinKeyLength: 2}, handler: func(b *bundle, w http.ResponseWriter, r *http.Request) {
		_, protected := idemhttp.AttemptFromContext(r.Context())
		w.Header().Set("X-Protected", fmt.Sprint(protected))
		createPayment(b, w, r)
	}})
	for range 2 {
		a := b.do(t, call{body: `{"a":1}`})
		require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
		require.Equal(t, "false", a.header.Get("X-Protected"))
		require.Empty(t, a.header.Get(idemhttp.DefaultReplayHeader))
	}
	require.EqualValues(t, 2, b.calls.Load(), "unprotected: each runs")
	require.Zero(t, b.records(t))
	require.EqualValues(t, 2, b.m.Keyless(), "each counted")

	first := b.do(t, call{key: key(`"k1"`), body: `{"a":1}`})
	require.Equal(t, "true", first.header.Get("X-Protected"))
	require.Equal(t, "true", b.do(t, call{key: key(`"k1"`), body: `{"a":1}`}).header.Get(idemhttp.DefaultReplayHeader))
	for _, bad := range []call{{key: key(`""`)}, {key: key(`"k"`)}, {keys: []string{`"k1"`, `"k2"`}}} {
		problem(t, b.do(t, bad), http.StatusBadRequest, idemhttp.TypeKeyInvalid, false)
	}
	require.EqualValues(t, 3, b.calls.Load())
	require.Equal(t, 1, b.records(t))
	require.EqualValues(t, 2, b.m.Keyless(), "a request with a key, or a bad one, is not keyless")
}

// TestIgnoreFields: volatile fields are left out of the fingerprint and
// of the stored intent; everything else still conflicts.
func TestIgnoreFields(t *testing.T) {
	t.Parallel()

	t.Run("Equivalent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{opts: idemhttp.Config{IgnoreFields: []string{"/meta/sent_at", "/trace~1id", "/items/0/ts", "/absent/x", "/items/9"}}})
		body := func(sentAt, trace string, ts int, amount string) string {
			return fmt.Sprintf(`{"amount":%s,"meta":{"sent_at":%q,"client":"web"},"trace/id":%q,"items":[{"ts":%d,"sku":"x"},{"ts":1}]}`, amount, sentAt, trace, ts)
		}
		first := b.do(t, call{key: key(`"k"`), body: body("2026-01-01T00:00:00Z", "t-1", 1, "10")})
		require.Equal(t, http.StatusCreated, first.status, "%s", first.body)
		require.Contains(t, string(first.body), "2026-01-01", "the handler gets the body as sent")
		again := b.do(t, call{key: key(`"k"`), body: body("2026-01-01T00:00:09Z", "t-2", 2, "1e1")})
		require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader), "%s", again.body)
		require.Equal(t, first.body, again.body)
		require.EqualValues(t, 1, b.calls.Load())

		// Anything else still names another request: a kept field, the
		// second item's ts (only /items/0/ts is ignored), a field added.
		for _, other := range []string{
			body("2026-01-01T00:00:00Z", "t-1", 1, "11"),
			strings.Replace(body("x", "t", 5, "10"), `{"ts":1}`, `{"ts":2}`, 1),
			strings.Replace(body("x", "t", 1, "10"), `"web"`, `"app"`, 1),
			strings.Replace(body("x", "t", 1, "10"), `"amount"`, `"note":"","amount"`, 1),
		} {
			problem(t, b.do(t, call{key: key(`"k"`), body: other}), http.StatusUnprocessableEntity, idemhttp.TypeKeyReused, false)
		}
		require.EqualValues(t, 1, b.calls.Load())
		// Nor are the ignored fields kept for operators.
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations
			WHERE (intent->'intent'->'body')::jsonb = '{"amount":10,"meta":{"client":"web"},"items":[{"sku":"x"},{"ts":1}]}'::jsonb`))
	})

	t.Run("ExactBytes", func(t *testing.T) {
		t.Parallel()
		// JSON fingerprinted by its bytes (duplicate names) ignores
		// nothing: a different request must never look the same.
		b := setup(t, setupOpts{opts: idemhttp.Config{IgnoreFields: []string{"/ts"}}})
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"d"`), body: `{"a":1,"a":2,"ts":1}`}).status)
		problem(t, b.do(t, call{key: key(`"d"`), body: `{"a":1,"a":2,"ts":2}`}), http.StatusUnprocessableEntity, idemhttp.TypeKeyReused, false)
		// Non-JSON bodies too.
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"t"`), body: `ts=1`, contentType: "text/plain"}).status)
		problem(t, b.do(t, call{key: key(`"t"`), body: `ts=2`, contentType: "text/plain"}), http.StatusUnprocessableEntity, idemhttp.TypeKeyReused, false)
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ pointer, want string }{
			{"", "names the whole body"},
			{"meta/sent_at", `does not start with "/"`},
			{"/meta/../sent_at", "no dot segments"},
			{"/./sent_at", "no dot segments"},
			{"/..", "no dot segments"},
			{"/a~2b", "~0"},
			{"/a~", "~0"},
			{"/\xff", "not valid UTF-8"},
		} {
			err := newErr(t, idemhttp.Config{IgnoreFields: []string{"/ok", tc.pointer}})
			require.ErrorContains(t, err, "Config.IgnoreFields: pointer 1", "%q", tc.pointer)
			require.ErrorContains(t, err, tc.want, "%q", tc.pointer)
		}
		err := newErr(t, idemhttp.Config{IgnoreFields: []string{strings.Repeat("x", 1<<20)}})
		require.Less(t, len(err.Error()), 300, "the pointer is not echoed whole")
		require.NoError(t, newErr(t, idemhttp.Config{IgnoreFields: []string{"/a~0b~1c/0/-/", "/"}}))
	})
}

// TestNewKeyLimit: a tenant over its limit on new keys gets 429 with
// Retry-After and nothing runs; replays and other tenants are not limited,
// and the refused key runs once the limit allows.
func TestNewKeyLimit(t *testing.T) {
	t.Parallel()

	t.Run("Hour", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{opts: idemhttp.Config{NewKeys: idemhttp.KeyLimit{Keys: 2, Per: time.Hour}}})
		for _, k := range []string{`"k1"`, `"k2"`} {
			require.Equal(t, http.StatusCreated, b.do(t, call{key: key(k)}).status)
		}
		a := b.do(t, call{key: key(`"k3"`)})
		p := problem(t, a, http.StatusTooManyRequests, idemhttp.TypeTooManyKeys, true)
		require.Contains(t, p.Detail, "nothing ran")
		wait, err := strconv.Atoi(a.header.Get("Retry-After"))
		require.NoError(t, err)
		require.InDelta(t, 1800, wait, 2, "a key's token comes back in an hour / 2")
		// A replay is no new key; another tenant has its own limit.
		require.Equal(t, "true", b.do(t, call{key: key(`"k1"`)}).header.Get(idemhttp.DefaultReplayHeader))
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"k3"`), apiKey: "Bearer key-globex"}).status)
		require.EqualValues(t, 3, b.calls.Load())
	})

	t.Run("RetryAfterRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{opts: idemhttp.Config{NewKeys: idemhttp.KeyLimit{Keys: 1, Per: time.Second}}})
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"a"`)}).status)
		a := b.do(t, call{key: key(`"b"`)})
		problem(t, a, http.StatusTooManyRequests, idemhttp.TypeTooManyKeys, true)
		require.Equal(t, "1", a.header.Get("Retry-After"))
		time.Sleep(time.Second)
		again := b.do(t, call{key: key(`"b"`)})
		require.Equal(t, http.StatusCreated, again.status, "%s", again.body)
		require.Empty(t, again.header.Get(idemhttp.DefaultReplayHeader), "the refused key was released: this is its first run")
		require.EqualValues(t, 2, b.calls.Load())
	})

	t.Run("Extremes", func(t *testing.T) {
		t.Parallel()
		// Far more than a key a nanosecond: no key is refused.
		b := setup(t, setupOpts{opts: idemhttp.Config{NewKeys: idemhttp.KeyLimit{Keys: math.MaxInt, Per: time.Nanosecond}}})
		for _, k := range []string{`"a"`, `"b"`, `"c"`} {
			require.Equal(t, http.StatusCreated, b.do(t, call{key: key(k)}).status)
		}
		// One key a century: the wait fits Retry-After.
		b = setup(t, setupOpts{opts: idemhttp.Config{NewKeys: idemhttp.KeyLimit{Keys: 1, Per: 100 * 365 * 24 * time.Hour}}})
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"a"`)}).status)
		a := b.do(t, call{key: key(`"b"`)})
		problem(t, a, http.StatusTooManyRequests, idemhttp.TypeTooManyKeys, true)
		wait, err := strconv.ParseInt(a.header.Get("Retry-After"), 10, 64)
		require.NoError(t, err)
		require.InDelta(t, 100*365*24*3600, wait, 5)
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		for _, l := range []idemhttp.KeyLimit{{Keys: -1, Per: time.Second}, {Keys: 1, Per: -time.Second}} {
			require.ErrorContains(t, newErr(t, idemhttp.Config{NewKeys: l}), "is negative", "%+v", l)
		}
		for _, l := range []idemhttp.KeyLimit{{Keys: 1}, {Per: time.Second}} {
			require.ErrorContains(t, newErr(t, idemhttp.Config{NewKeys: l}), "set both", "%+v", l)
		}
	})
}
