package idemhttp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
)

const tool = "create-payment"

// bundle is a server with the middleware in front of a handler, over a
// fresh store.
type bundle struct {
	db    *dbtest.DB
	srv   *httptest.Server
	m     *idemhttp.Middleware
	calls atomic.Int64
}

// setupOpts configures setup.
type setupOpts struct {
	policy  ops.Policy
	opts    idemhttp.Config
	handler func(b *bundle, w http.ResponseWriter, r *http.Request)
	// pool overrides the store's pool (a dead one).
	pool *pgxpool.Pool
	// maxResult is the store's Config.MaxResultBytes.
	maxResult int
	// http2: the server speaks HTTP/2 (over TLS), and so does its client.
	http2 bool
}

// accountHeader stands for the service's authentication: the tenant is
// the account its API key belongs to.
const accountHeader = "Authorization"

var accounts = map[string]string{"Bearer key-acme": "acme", "Bearer key-globex": "globex"}

// tenantOf is the service's Tenant function: from the credentials, never
// from a header the client names its tenant in.
func tenantOf(r *http.Request) (string, error) {
	tenant, ok := accounts[r.Header.Get(accountHeader)]
	if !ok {
		return "", errors.New("unknown API key")
	}
	return tenant, nil
}

// createPayment answers 201 with a body whose JSON is not canonical
// (member order, spacing), numbered by the handler's calls, a Location,
// and a header that is not stored.
func createPayment(b *bundle, w http.ResponseWriter, r *http.Request) {
	n := b.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/payments/%d", n))
	w.Header().Set("X-Request-Note", "not stored")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "{\"z\": %d,  \"a\":\"\\u00e9\", \"echo\": %q}\n", n, body)
}

func setup(t *testing.T, so setupOpts) *bundle {
	t.Helper()
	b := &bundle{db: dbtest.New(t)}
	if so.policy.Effect == "" {
		so.policy = ops.Policy{Effect: ops.EffectUnknownOutcome}
	}
	if so.opts.Tool == "" {
		so.opts.Tool = tool
	}
	if so.opts.Tenant == nil {
		so.opts.Tenant = tenantOf
	}
	if so.handler == nil {
		so.handler = createPayment
	}
	pool := b.db.Service
	if so.pool != nil {
		pool = so.pool
	}
	store, err := ops.New(pool, ops.Config{Tools: map[string]ops.Policy{so.opts.Tool: so.policy}, Owner: "api-1", MaxResultBytes: so.maxResult})
	require.NoError(t, err)
	m, err := idemhttp.New(store, so.opts)
	require.NoError(t, err)
	b.m = m
	mux := http.NewServeMux()
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { so.handler(b, w, r) }))
	mux.Handle("/payments", h)
	mux.Handle("/payments/{id}", h)
	b.srv = httptest.NewUnstartedServer(mux)
	// The handlers that panic on purpose are not worth a log line.
	b.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if so.http2 {
		b.srv.EnableHTTP2 = true
		b.srv.StartTLS()
	} else {
		b.srv.Start()
	}
	t.Cleanup(b.srv.Close)
	return b
}

// call is one request to the bundle's server.
type call struct {
	method, path string
	key          *string // nil: no header
	keys         []string
	apiKey       string
	body         string
	contentType  string
	header       http.Header
}

type answer struct {
	status int
	header http.Header
	body   []byte
	// closed: the server closes the connection after the answer.
	closed bool
}

func key(k string) *string { return &k }

func (b *bundle) do(t *testing.T, c call) answer {
	t.Helper()
	if c.method == "" {
		c.method = http.MethodPost
	}
	if c.path == "" {
		c.path = "/payments"
	}
	if c.apiKey == "" {
		c.apiKey = "Bearer key-acme"
	}
	if c.contentType == "" && c.body != "" {
		c.contentType = "application/json"
	}
	req, err := http.NewRequestWithContext(t.Context(), c.method, b.srv.URL+c.path, strings.NewReader(c.body))
	require.NoError(t, err)
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set(accountHeader, c.apiKey)
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	if c.key != nil {
		req.Header.Set(idemhttp.KeyHeader, *c.key)
	}
	for _, k := range c.keys {
		req.Header.Add(idemhttp.KeyHeader, k)
	}
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: body, closed: resp.Close}
}

// dropped makes a call whose handler panics with http.ErrAbortHandler:
// net/http drops the connection without an answer.
func (b *bundle) dropped(t *testing.T, key string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.srv.URL+"/payments", nil)
	require.NoError(t, err)
	req.Header.Set(accountHeader, "Bearer key-acme")
	req.Header.Set(idemhttp.KeyHeader, key)
	resp, err := b.srv.Client().Do(req)
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err, "the connection is dropped without an answer")
}

// panicked makes a call whose handler panics: the client gets a whole
// 500 handler-failed answer, whose retry guidance is retry's, and the
// connection is closed after it.
func (b *bundle) panicked(t *testing.T, key string, retry bool) idemhttp.Problem {
	t.Helper()
	a := b.do(t, call{key: &key})
	require.True(t, a.closed, "Connection: close")
	return problem(t, a, http.StatusInternalServerError, idemhttp.TypeHandlerFailed, retry)
}

// problem checks a is the middleware's problem answer of the given type
// and status, and returns it.
func problem(t *testing.T, a answer, status int, typ string, retry bool) idemhttp.Problem {
	t.Helper()
	require.Equal(t, status, a.status, "%s", a.body)
	require.Equal(t, idemhttp.ProblemContentType, a.header.Get("Content-Type"))
	require.Empty(t, a.header.Get(idemhttp.DefaultReplayHeader))
	var p idemhttp.Problem
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&p), "%s", a.body)
	require.Equal(t, typ, p.Type, p.Detail)
	require.Equal(t, status, p.Status)
	require.NotEmpty(t, p.Title)
	require.NotEmpty(t, p.Detail)
	require.Equal(t, retry, p.RetryWithSameKey, p.Detail)
	// Every member RFC 9457 names, and the extension, are in the body.
	var members map[string]any
	require.NoError(t, json.Unmarshal(a.body, &members))
	for _, m := range []string{"type", "title", "status", "detail", "retry_with_same_key"} {
		require.Contains(t, members, m)
	}
	return p
}

func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Admin.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

func (b *bundle) records(t *testing.T) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM opsdesk.operations`)
}

func TestReplay(t *testing.T) {
	t.Parallel()

	// The replay is the first answer's status, stored headers and body,
	// byte for byte, though the body's JSON is not canonical and the store
	// keeps results as jsonb; a request body whose JSON differs only in
	// member order and spacing is the same request.
	t.Run("ByteForByte", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := b.do(t, call{key: key(`"pay-1"`), body: `{"amount": 4200, "currency": "EUR"}`})
		require.Equal(t, http.StatusCreated, first.status, "%s", first.body)
		require.Empty(t, first.header.Get(idemhttp.DefaultReplayHeader), "the first answer is no replay")
		require.Equal(t, "not stored", first.header.Get("X-Request-Note"), "the first answer carries every header")
		require.Contains(t, string(first.body), `{"z": 1,  "a":"\u00e9"`)

		for _, body := range []string{`{"amount": 4200, "currency": "EUR"}`, "{\"currency\":\"EUR\",\n\t\"amount\":4200}", `{"currency":"\u0045UR","amount":4.2e3}`} {
			again := b.do(t, call{key: key(`pay-1`), body: body}) // the unquoted form names the same key
			require.Equal(t, http.StatusCreated, again.status, "%s", again.body)
			require.Equal(t, first.body, again.body, "the body replays byte for byte")
			require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader))
			require.Equal(t, "/payments/1", again.header.Get("Location"))
			require.Equal(t, "application/json", again.header.Get("Content-Type"))
			require.Empty(t, again.header.Get("X-Request-Note"), "a header that is not chosen is not replayed")
		}
		require.EqualValues(t, 1, b.calls.Load(), "the handler ran once")
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE state = 'completed' AND outcome = 'succeeded'`))
	})

	// A binary request body is fingerprinted by its bytes, and a binary
	// answer (NUL, invalid UTF-8) replays byte for byte.
	t.Run("BinaryBodies", func(t *testing.T) {
		t.Parallel()
		answerBody := []byte{0, 0xff, 0xfe, '"', '\\', 'u', '0', '0', '0', '0', 0x80, '\n', 0xc3}
		b := setup(t, setupOpts{handler: func(b *bundle, w http.ResponseWriter, _ *http.Request) {
			b.calls.Add(1)
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(answerBody)
		}})
		reqBody := string([]byte{0x00, 0x01, 0xff, 'x'})
		first := b.do(t, call{key: key(`"bin-1"`), body: reqBody, contentType: "application/octet-stream"})
		require.Equal(t, http.StatusOK, first.status, "%s", first.body)
		require.Equal(t, answerBody, first.body)
		again := b.do(t, call{key: key(`"bin-1"`), body: reqBody, contentType: "application/octet-stream"})
		require.Equal(t, answerBody, again.body)
		require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader))
		require.Equal(t, "application/octet-stream", again.header.Get("Content-Type"))

		// One byte more, or another media type, is another request.
		a := b.do(t, call{key: key(`"bin-1"`), body: reqBody + "\x00", contentType: "application/octet-stream"})
		problem(t, a, http.StatusUnprocessableEntity, idemhttp.TypeKeyReused, false)
		a = b.do(t, call{key: key(`"bin-1"`), body: reqBody, contentType: "image/png"})
		problem(t, a, http.StatusUnprocessableEntity, idemhttp.TypeKeyReused, false)
		require.EqualValues(t, 1, b.calls.Load())
	})

	// A handler that sets no Content-Type gets the one net/http sniffs,
	// on the first answer and on the replay alike.
	t.Run("SniffedContentType", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{handler: func(b *bundle, w http.ResponseWriter, _ *http.Request) {
			b.calls.Add(1)
			_, _ = io.WriteString(w, "<html>ok</html>")
		}})
		first := b.do(t, call{key: key(`"s-1"`)})
		again := b.do(t, call{key: key(`"s-1"`)})
		require.Equal(t, "text/html; charset=utf-8", first.header.Get("Content-Type"))
		require.Equal(t, first.header.Get("Content-Type"), again.header.Get("Content-Type"))
		require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader))
	})
}

// TestKeyReused: the same key with another method, path, query or body is
// 422 and runs nothing; the attempt is recorded as a conflict.
func TestKeyReused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	first := b.do(t, call{key: key(`"k"`), body: `{"amount": 4200}`})
	require.Equal(t, http.StatusCreated, first.status)
	for _, c := range []call{
		{key: key(`"k"`), body: `{"amount": 4201}`},
		{key: key(`"k"`), body: `{"amount": 4200, "extra": null}`},
		{key: key(`"k"`), body: `{"amount": 4200}`, method: http.MethodPatch},
		{key: key(`"k"`), body: `{"amount": 4200}`, path: "/payments?dry_run=1"},
		{key: key(`"k"`), body: `{"amount": 4200}`, path: "/payments/1"},
		{key: key(`"k"`)},
	} {
		a := b.do(t, c)
		p := problem(t, a, http.StatusUnprocessableEntity, idemhttp.TypeKeyReused, false)
		require.Equal(t, "Idempotency-Key is already used", p.Title)
	}
	require.EqualValues(t, 1, b.calls.Load())
	require.Equal(t, 6, b.count(t, `SELECT count(*) FROM opsdesk.conflicts`))
	again := b.do(t, call{key: key(`"k"`), body: `{"amount":4200}`})
	require.Equal(t, first.body, again.body, "the original answer is untouched")
}

// TestConcurrentSameKey: requests with one key that arrive while the first
// runs get 409 with Retry-After and run nothing; the handler runs once.
func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	const n = 12
	entered, release := make(chan struct{}, n), make(chan struct{})
	b := setup(t, setupOpts{
		policy: ops.Policy{Effect: ops.EffectUnknownOutcome, Lease: 5 * time.Second},
		handler: func(b *bundle, w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
			createPayment(b, w, r)
		},
	})
	start := make(chan struct{})
	answers := make(chan answer, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			answers <- b.do(t, call{key: key(`"same"`), body: `{"amount": 1}`})
		})
	}
	close(start)
	// Every request but the one running answers while it still runs (a
	// second run would hold its request too, and time out here).
	var busy []answer
	for range n - 1 {
		select {
		case a := <-answers:
			busy = append(busy, a)
		case <-time.After(30 * time.Second):
			close(release)
			t.Fatalf("%d requests answered while the first ran; the handler was entered %d times", len(busy), len(entered))
		}
	}
	close(release)
	wg.Wait()
	close(answers)
	winner := <-answers
	require.Equal(t, http.StatusCreated, winner.status, "%s", winner.body)
	require.Len(t, entered, 1, "the handler ran once")
	for _, a := range busy {
		problem(t, a, http.StatusConflict, idemhttp.TypeInProgress, true)
		after, err := strconv.Atoi(a.header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After is delta-seconds")
		require.True(t, after >= 1 && after <= 5, "Retry-After %d is within the lease", after)
	}
	replay := b.do(t, call{key: key(`"same"`), body: `{"amount": 1}`})
	require.Equal(t, winner.body, replay.body)
	require.EqualValues(t, 1, b.calls.Load())
}

// TestRetryAfterEstimate: a 409 in-progress answer's Retry-After is when
// the answer is likely ready (the handler's typical duration), not the
// lease's remainder: with the default 30 s lease, a 0.2 s handler gave
// Retry-After: 30.
func TestRetryAfterEstimate(t *testing.T) {
	t.Parallel()

	// held is a request with key "held" kept in the handler until
	// release; other keys take 0.2 s.
	type held struct {
		entered, release chan struct{}
	}
	slowOn := func(h *held) func(b *bundle, w http.ResponseWriter, r *http.Request) {
		return func(b *bundle, w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(idemhttp.KeyHeader) == `"held"` {
				close(h.entered)
				<-h.release
			} else {
				time.Sleep(200 * time.Millisecond)
			}
			createPayment(b, w, r)
		}
	}
	// busyAnswer is the answer to a second request with key "held" while
	// the first is held in the handler.
	busyAnswer := func(t *testing.T, b *bundle, h *held) answer {
		t.Helper()
		first := make(chan answer, 1)
		go func() { first <- b.do(t, call{key: key(`"held"`)}) }()
		<-h.entered
		a := b.do(t, call{key: key(`"held"`)})
		close(h.release)
		require.Equal(t, http.StatusCreated, (<-first).status)
		problem(t, a, http.StatusConflict, idemhttp.TypeInProgress, true)
		return a
	}

	t.Run("Observed", func(t *testing.T) {
		t.Parallel()
		h := &held{entered: make(chan struct{}), release: make(chan struct{})}
		b := setup(t, setupOpts{policy: ops.Policy{Effect: ops.EffectUnknownOutcome}, handler: slowOn(h)})
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"quick"`)}).status)
		require.Equal(t, "1", busyAnswer(t, b, h).header.Get("Retry-After"), "0.2 s, rounded up")
	})

	t.Run("Configured", func(t *testing.T) {
		t.Parallel()
		h := &held{entered: make(chan struct{}), release: make(chan struct{})}
		b := setup(t, setupOpts{policy: ops.Policy{Effect: ops.EffectUnknownOutcome},
			opts: idemhttp.Config{TypicalDuration: 2500 * time.Millisecond}, handler: slowOn(h)})
		require.Equal(t, "3", busyAnswer(t, b, h).header.Get("Retry-After"))
	})

	// The attempt's time so far counts: after more than a second of a
	// 2.5 s handler, what remains is under 1.5 s, rounded up.
	t.Run("ElapsedCounts", func(t *testing.T) {
		t.Parallel()
		h := &held{entered: make(chan struct{}), release: make(chan struct{})}
		b := setup(t, setupOpts{policy: ops.Policy{Effect: ops.EffectUnknownOutcome},
			opts: idemhttp.Config{TypicalDuration: 2500 * time.Millisecond}, handler: slowOn(h)})
		first := make(chan answer, 1)
		go func() { first <- b.do(t, call{key: key(`"held"`)}) }()
		<-h.entered
		time.Sleep(1100 * time.Millisecond) // the attempt runs on
		a := b.do(t, call{key: key(`"held"`)})
		close(h.release)
		require.Equal(t, http.StatusCreated, (<-first).status)
		problem(t, a, http.StatusConflict, idemhttp.TypeInProgress, true)
		after, err := strconv.Atoi(a.header.Get("Retry-After"))
		require.NoError(t, err)
		require.True(t, after >= 1 && after <= 2, "Retry-After %d: 2.5 s less the 1.1 s and more it has run", after)
	})

	// Nothing seen yet: the lease's remainder, the only bound known.
	t.Run("LeaseUntilSeen", func(t *testing.T) {
		t.Parallel()
		h := &held{entered: make(chan struct{}), release: make(chan struct{})}
		b := setup(t, setupOpts{policy: ops.Policy{Effect: ops.EffectUnknownOutcome, Lease: 4 * time.Second}, handler: slowOn(h)})
		after, err := strconv.Atoi(busyAnswer(t, b, h).header.Get("Retry-After"))
		require.NoError(t, err)
		require.True(t, after >= 3 && after <= 4, "Retry-After %d is the lease's remainder", after)
	})
}

// TestPassThrough: GET, HEAD, PUT and DELETE are not protected: they run
// every time, need no key, and leave no record.
func TestPassThrough(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete} {
		for _, k := range []*string{nil, key(`"k"`)} {
			a := b.do(t, call{method: m, key: k})
			require.Equal(t, http.StatusCreated, a.status, m)
			require.Empty(t, a.header.Get(idemhttp.DefaultReplayHeader))
		}
	}
	require.EqualValues(t, 8, b.calls.Load())
	require.Zero(t, b.records(t))

	// A service may protect other methods.
	p := setup(t, setupOpts{opts: idemhttp.Config{Methods: []string{http.MethodPut}}})
	problem(t, p.do(t, call{method: http.MethodPut}), http.StatusBadRequest, idemhttp.TypeKeyMissing, false)
	require.Equal(t, http.StatusCreated, p.do(t, call{method: http.MethodPost}).status)
}

// TestBadKeys: a protected request without a usable key is 400 and runs
// nothing, records nothing.
func TestBadKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	a := b.do(t, call{})
	p := problem(t, a, http.StatusBadRequest, idemhttp.TypeKeyMissing, false)
	require.Equal(t, "Idempotency-Key is missing", p.Title)
	for _, c := range []call{
		{key: key("")},
		{key: key(`""`)},
		{key: key(`"` + strings.Repeat("k", 256) + `"`)},
		{key: key(strings.Repeat("k", 256))},
		{key: key("\"a\tb\"")},
		{key: key(`"ключ"`)},
		{key: key("ключ-ü")},
		{key: key("\"a\u3000b\"")},
		{key: key(`"a", "b"`)},
		{keys: []string{`"a"`, `"a"`}},
		{key: key(`"a";v=1`)},
		{key: key(`"a\x"`)},
		{key: key(`"unterminated`)},
	} {
		a := b.do(t, c)
		problem(t, a, http.StatusBadRequest, idemhttp.TypeKeyInvalid, false)
	}
	require.Zero(t, b.calls.Load())
	require.Zero(t, b.records(t))

	// Control characters never reach the middleware: net/http refuses
	// the request first. Sent raw, as a hostile client would.
	for _, v := range []string{"\"a\x01b\"", "\"a\x7fb\"", "a\x00b"} {
		conn, err := net.Dial("tcp", b.srv.Listener.Addr().String())
		require.NoError(t, err)
		_, err = fmt.Fprintf(conn, "POST /payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-acme\r\nIdempotency-Key: %s\r\nContent-Length: 0\r\n\r\n", v)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%q", v)
		resp.Body.Close()
		conn.Close()
	}
	require.Zero(t, b.calls.Load())

	// The quoted and unquoted forms, and escapes, name keys exactly.
	require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"a\"b"`)}).status)
	require.Equal(t, "true", b.do(t, call{key: key(`"a\"b"`)}).header.Get(idemhttp.DefaultReplayHeader))
	require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"a\\b"`)}).status, `a\b is another key than a"b`)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE key IN ('a"b', 'a\b')`))
}

// TestTenant: the tenant is what the service's function says, whatever
// the client sends; the same key under two tenants is two operations.
func TestTenant(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	spoof := http.Header{"Tenant": {"globex"}, "X-Tenant": {"globex"}}
	a := b.do(t, call{key: key(`"k"`), apiKey: "Bearer key-acme", header: spoof})
	require.Equal(t, http.StatusCreated, a.status)
	// globex's own request with the same key is its own operation.
	g := b.do(t, call{key: key(`"k"`), apiKey: "Bearer key-globex"})
	require.Equal(t, http.StatusCreated, g.status)
	require.Empty(t, g.header.Get(idemhttp.DefaultReplayHeader), "not acme's answer")
	require.NotEqual(t, a.body, g.body)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE tenant = 'acme' AND key = 'k'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE tenant = 'globex' AND key = 'k'`))

	// The function's refusal is 400 and runs nothing; its text, which
	// may be internal, is not sent.
	r := b.do(t, call{key: key(`"k2"`), apiKey: "Bearer nobody"})
	p := problem(t, r, http.StatusBadRequest, idemhttp.TypeTenantInvalid, false)
	require.NotContains(t, string(r.body), "unknown API key")
	require.Contains(t, p.Detail, "nothing ran")
	require.EqualValues(t, 2, b.calls.Load())
}

// TestTenantError: a Tenant function chooses its refusal's status and
// detail with *TenantError; its cause is never sent.
func TestTenantError(t *testing.T) {
	t.Parallel()
	const secret = "accounts-db.internal:5432 timeout"
	b := setup(t, setupOpts{opts: idemhttp.Config{Tenant: func(r *http.Request) (string, error) {
		switch r.Header.Get(accountHeader) {
		case "":
			return "", &idemhttp.TenantError{Status: http.StatusUnauthorized, Detail: "send your API key as a bearer token"}
		case "Bearer key-frozen":
			return "", fmt.Errorf("account check: %w", &idemhttp.TenantError{Status: http.StatusForbidden, Err: errors.New(secret)})
		case "Bearer key-down":
			return "", &idemhttp.TenantError{Status: http.StatusServiceUnavailable, Err: errors.New(secret)}
		case "Bearer key-odd":
			return "", &idemhttp.TenantError{Status: 200, Detail: "odd"}
		}
		return tenantOf(r)
	}}})
	for _, tc := range []struct {
		apiKey string
		status int
		retry  bool
		detail string
	}{
		{"", http.StatusUnauthorized, false, "send your API key as a bearer token; nothing ran"},
		{"Bearer key-frozen", http.StatusForbidden, false, "the service could not tell which tenant the request is for; nothing ran"},
		{"Bearer key-down", http.StatusServiceUnavailable, true, "the service could not tell which tenant the request is for; nothing ran"},
		{"Bearer key-odd", http.StatusBadRequest, false, "odd; nothing ran"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.srv.URL+"/payments", nil)
		require.NoError(t, err)
		if tc.apiKey != "" {
			req.Header.Set(accountHeader, tc.apiKey)
		}
		req.Header.Set(idemhttp.KeyHeader, `"k"`)
		resp, err := b.srv.Client().Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		p := problem(t, answer{status: resp.StatusCode, header: resp.Header, body: body}, tc.status, idemhttp.TypeTenantInvalid, tc.retry)
		require.Equal(t, tc.detail, p.Detail)
		require.NotContains(t, string(body), secret)
		require.Equal(t, tc.retry, resp.Header.Get("Retry-After") != "", tc.apiKey)
	}
	require.Zero(t, b.calls.Load())
	require.Zero(t, b.records(t))
}

// TestStoreDown: with the store unreachable the answer is 503 with
// Retry-After, and the handler does not run.
func TestStoreDown(t *testing.T) {
	t.Parallel()

	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().(*net.TCPAddr)
		require.NoError(t, ln.Close()) // nothing listens there now
		pool, err := pgxpool.New(t.Context(), fmt.Sprintf("host=127.0.0.1 port=%d user=x dbname=x sslmode=disable connect_timeout=2", addr.Port))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		b := setup(t, setupOpts{pool: pool, opts: idemhttp.Config{UnavailableRetryAfter: 2500 * time.Millisecond}})
		a := b.do(t, call{key: key(`"k"`), body: `{}`})
		problem(t, a, http.StatusServiceUnavailable, idemhttp.TypeUnavailable, true)
		require.Equal(t, "3", a.header.Get("Retry-After"), "rounded up to whole seconds")
		require.Zero(t, b.calls.Load())
	})

	t.Run("ClosedPool", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		pool := dbtest.Pool(t, d.ServiceDSN)
		pool.Close()
		b := setup(t, setupOpts{pool: pool})
		a := b.do(t, call{key: key(`"k"`), body: `{}`})
		problem(t, a, http.StatusServiceUnavailable, idemhttp.TypeUnavailable, true)
		require.Equal(t, "1", a.header.Get("Retry-After"))
		require.Zero(t, b.calls.Load())
	})
}

// TestHandlerOutcomes: what the store does with each kind of answer.
func TestHandlerOutcomes(t *testing.T) {
	t.Parallel()

	// answering serves status n with body "answer <call>".
	answering := func(status int) func(b *bundle, w http.ResponseWriter, r *http.Request) {
		return func(b *bundle, w http.ResponseWriter, _ *http.Request) {
			n := b.calls.Add(1)
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(status)
			fmt.Fprintf(w, "answer %d", n)
		}
	}

	// A 4xx is the handler's judgement: stored as a rejection, replayed.
	t.Run("RejectionStored", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{handler: answering(http.StatusPaymentRequired)})
		first := b.do(t, call{key: key(`"k"`)})
		require.Equal(t, http.StatusPaymentRequired, first.status)
		again := b.do(t, call{key: key(`"k"`)})
		require.Equal(t, http.StatusPaymentRequired, again.status)
		require.Equal(t, "answer 1", string(again.body))
		require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader))
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE outcome = 'rejected'`))
	})

	// 503 (and 429, 408, 425) say nothing was done: the key is released
	// and the next retry runs the handler again.
	t.Run("NotAppliedReleased", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{handler: answering(http.StatusServiceUnavailable)})
		require.Equal(t, "answer 1", string(b.do(t, call{key: key(`"k"`)}).body))
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE state = 'released'`))
		second := b.do(t, call{key: key(`"k"`)})
		require.Equal(t, "answer 2", string(second.body))
		require.Empty(t, second.header.Get(idemhttp.DefaultReplayHeader))
	})

	// Any other 5xx leaves the outcome unknown. For an unknown-outcome
	// tool the handler has returned, so nobody is handling the request
	// any more: the record is stuck at once (not after the lease, 30 s by
	// default), and every retry waits for an operator: never a second run.
	t.Run("UnknownWaitsForOperator", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{
			policy:  ops.Policy{Effect: ops.EffectUnknownOutcome, Lease: time.Hour},
			handler: answering(http.StatusInternalServerError),
		})
		first := b.do(t, call{key: key(`"k"`)})
		require.Equal(t, http.StatusInternalServerError, first.status)
		require.Equal(t, "answer 1", string(first.body), "the client gets the handler's own answer")
		// Stuck now, by the database clock: what the console and the
		// exporter count.
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE state = 'pending' AND lease_expires_at <= now()`))
		p := problem(t, b.do(t, call{key: key(`"k"`)}), http.StatusConflict, idemhttp.TypeNeedsReconciliation, false)
		require.Contains(t, p.Detail, "operator")
		require.Empty(t, b.do(t, call{key: key(`"k"`)}).header.Get("Retry-After"))
		require.EqualValues(t, 1, b.calls.Load())
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE state = 'pending'`))
	})

	// For a tool whose handler is safe to run again under the key, the
	// next retry does so at once.
	t.Run("UnknownRetriedWhenIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{policy: ops.Policy{Effect: ops.EffectIdempotentProvider}, handler: answering(http.StatusBadGateway)})
		require.Equal(t, "answer 1", string(b.do(t, call{key: key(`"k"`)}).body))
		require.Equal(t, "answer 2", string(b.do(t, call{key: key(`"k"`)}).body))
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE attempt = 2`))
	})

	// A handler that panics has an unknown outcome too. The record is
	// stuck at once, the client is told a person must find out (not
	// "being handled now" for the rest of the lease), and the panic goes
	// on to net/http, which closes the connection after the answer. A
	// handler that aborts (http.ErrAbortHandler) gets no answer, as it
	// asked, but its record is settled the same way.
	t.Run("Panic", func(t *testing.T) {
		t.Parallel()
		for _, value := range []any{http.ErrAbortHandler, "handler bug"} {
			b := setup(t, setupOpts{
				policy: ops.Policy{Effect: ops.EffectUnknownOutcome, Lease: time.Hour},
				handler: func(b *bundle, w http.ResponseWriter, _ *http.Request) {
					b.calls.Add(1)
					w.WriteHeader(http.StatusCreated) // buffered: never sent
					panic(value)
				},
			})
			if value == http.ErrAbortHandler {
				b.dropped(t, `"k"`)
			} else {
				p := b.panicked(t, `"k"`, false)
				require.Contains(t, p.Detail, "operator")
			}
			require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE state = 'pending' AND lease_expires_at <= now()`))
			problem(t, b.do(t, call{key: key(`"k"`)}), http.StatusConflict, idemhttp.TypeNeedsReconciliation, false)
			require.EqualValues(t, 1, b.calls.Load())
		}
	})

	// Over HTTP/2 the answer is sent whole before the panic goes on:
	// net/http then resets the stream, so a client reading to the end
	// gets every byte of the problem and a stream error. With Recovered
	// set, the middleware passes the panic there instead, and the answer
	// ends cleanly, over either protocol, its connection kept.
	t.Run("PanicOverHTTP2", func(t *testing.T) {
		t.Parallel()
		type bug struct{ n int }
		for _, tc := range []struct {
			http2, recover bool
		}{{true, false}, {true, true}, {false, true}} {
			so := setupOpts{policy: ops.Policy{Effect: ops.EffectUnknownOutcome, Lease: time.Hour}, http2: tc.http2,
				handler: func(b *bundle, _ http.ResponseWriter, _ *http.Request) { b.calls.Add(1); panic(bug{7}) }}
			var recovered atomic.Value // this server's Recovered only
			if tc.recover {
				so.opts.Recovered = func(_ *http.Request, v any, stack []byte) { recovered.Store([]any{v, string(stack)}) }
			}
			b := setup(t, so)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.srv.URL+"/payments", nil)
			require.NoError(t, err)
			req.Header.Set(accountHeader, "Bearer key-acme")
			req.Header.Set(idemhttp.KeyHeader, `"k"`)
			resp, err := b.srv.Client().Do(req)
			require.NoError(t, err, "%+v", tc)
			body, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			wantProto := 1
			if tc.http2 {
				wantProto = 2
			}
			require.Equal(t, wantProto, resp.ProtoMajor)
			problem(t, answer{status: resp.StatusCode, header: resp.Header, body: body}, http.StatusInternalServerError, idemhttp.TypeHandlerFailed, false)
			if tc.recover {
				require.NoError(t, readErr, "the answer ends cleanly: %+v", tc)
				require.False(t, resp.Close, "no Connection: close: %+v", tc)
				got, ok := recovered.Load().([]any)
				require.True(t, ok, "Recovered was not called: %+v", tc)
				require.Equal(t, bug{7}, got[0])
				require.Contains(t, got[1], "runtime/debug.Stack", "the stack where it panicked")
				require.Contains(t, got[1], "middleware_test.go", "the stack where it panicked")
			} else {
				require.ErrorContains(t, readErr, "INTERNAL_ERROR", "the stream is reset after the whole answer")
			}
			require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE state = 'pending' AND lease_expires_at <= now()`))
			problem(t, b.do(t, call{key: key(`"k"`)}), http.StatusConflict, idemhttp.TypeNeedsReconciliation, false)
			require.EqualValues(t, 1, b.calls.Load())
		}
	})

	// A recoverer outside the middleware sees the handler's own value,
	// once the record is settled and the answer sent.
	t.Run("PanicSeenOutside", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		store, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{tool: {Effect: ops.EffectUnknownOutcome, Lease: time.Hour}}})
		require.NoError(t, err)
		m, err := idemhttp.New(store, idemhttp.Config{Tool: tool, Tenant: tenantOf})
		require.NoError(t, err)
		type bug struct{ n int }
		h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(bug{7}) }))
		req := httptest.NewRequest(http.MethodPost, "/payments", nil)
		req.Header.Set(accountHeader, "Bearer key-acme")
		req.Header.Set(idemhttp.KeyHeader, `"k"`)
		rec := httptest.NewRecorder()
		require.PanicsWithValue(t, bug{7}, func() { h.ServeHTTP(rec, req) })
		require.Equal(t, http.StatusInternalServerError, rec.Code)
		require.True(t, rec.Flushed, "the answer is sent before the panic goes on")
		require.Contains(t, rec.Body.String(), idemhttp.TypeHandlerFailed)
		var stuck int
		require.NoError(t, d.Admin.QueryRow(t.Context(), `SELECT count(*) FROM opsdesk.operations WHERE lease_expires_at <= now()`).Scan(&stuck))
		require.Equal(t, 1, stuck)
	})

	// A panic in a handler that is safe to run again under the key is run
	// again by the next request at once, not after the lease.
	t.Run("PanicRetriedWhenIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{
			policy: ops.Policy{Effect: ops.EffectIdempotentProvider, Lease: time.Minute},
			handler: func(b *bundle, w http.ResponseWriter, r *http.Request) {
				if b.calls.Load() == 0 {
					b.calls.Add(1)
					panic("handler bug")
				}
				createPayment(b, w, r)
			},
		})
		b.panicked(t, `"k"`, true)
		second := b.do(t, call{key: key(`"k"`)})
		require.Equal(t, http.StatusCreated, second.status, "%s", second.body)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE attempt = 2 AND state = 'completed'`))
	})

	// The handler learns its attempt: the identity to pass on.
	t.Run("AttemptInContext", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{handler: func(b *bundle, w http.ResponseWriter, r *http.Request) {
			a, ok := idemhttp.AttemptFromContext(r.Context())
			if !ok {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			fmt.Fprintf(w, "%s %d", a.Identity, a.Number)
		}})
		require.Equal(t, "acme/create-payment/k 1", string(b.do(t, call{key: key(`"k"`)}).body))
	})
}

// TestRequestBodies: what the fingerprint makes of bodies.
func TestRequestBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{opts: idemhttp.Config{MaxBody: 64}})

	// JSON that says it is JSON must be JSON.
	for _, body := range []string{`{`, `{"a":1} x`, "{\"a\":\"\xff\"}"} {
		problem(t, b.do(t, call{key: key(`"bad"`), body: body}), http.StatusBadRequest, idemhttp.TypeRequestInvalid, false)
	}
	// Over the limit: 413, nothing ran. At the limit: runs.
	problem(t, b.do(t, call{key: key(`"big"`), body: `"` + strings.Repeat("x", 63) + `"`}), http.StatusRequestEntityTooLarge, idemhttp.TypeBodyTooLarge, false)
	require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"big"`), body: `"` + strings.Repeat("x", 62) + `"`}).status)
	// A query that is not UTF-8.
	problem(t, b.do(t, call{key: key(`"q"`), path: "/payments?a=%ff\xff"}), http.StatusBadRequest, idemhttp.TypeRequestInvalid, false)
	require.EqualValues(t, 1, b.calls.Load())

	// JSON the canonical form cannot hold exactly is fingerprinted by its
	// bytes: replayed for the same bytes, 422 for different ones, and
	// never refused.
	for i, body := range []string{`{"n": 9007199254740993}`, `{"a":1,"a":2}`, `{"s":"\ud800"}`, `{"s":"\u0000"}`} {
		k := key(fmt.Sprintf(`"exact-%d"`, i))
		first := b.do(t, call{key: k, body: body})
		require.Equal(t, http.StatusCreated, first.status, "%s: %s", body, first.body)
		require.Equal(t, "true", b.do(t, call{key: k, body: body}).header.Get(idemhttp.DefaultReplayHeader), body)
		problem(t, b.do(t, call{key: k, body: " " + body}), http.StatusUnprocessableEntity, idemhttp.TypeKeyReused, false)
	}
	// 9007199254740993 and 9007199254740992 are one double; they are
	// different requests.
	require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"n"`), body: `{"n":9007199254740992}`}).status)
	problem(t, b.do(t, call{key: key(`"n"`), body: `{"n":9007199254740993}`}), http.StatusUnprocessableEntity, idemhttp.TypeKeyReused, false)
}

// TestStoreRefusals: the library's other refusals, each with its problem.
func TestStoreRefusals(t *testing.T) {
	t.Parallel()

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{policy: ops.Policy{Effect: ops.EffectUnknownOutcome, AfterExpiry: ops.RejectAfterExpiry}})
		// The record was purged; its tombstone lasts (a fixture, as the
		// superuser: purging is a person's audited act).
		_, err := b.db.Admin.Exec(t.Context(), `
INSERT INTO opsdesk.tombstones (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at)
VALUES ('acme', $1, 'old', 7, decode(repeat('ab', 32), 'hex'), now() - interval '1 day', now() + interval '1 day')`, tool)
		require.NoError(t, err)
		problem(t, b.do(t, call{key: key(`"old"`)}), http.StatusGone, idemhttp.TypeExpired, false)
		require.Zero(t, b.calls.Load())
	})

	// A request whose outcome was unknown and that an operator decided:
	// confirmed completed is 410 with the reference, marked failed is 410,
	// not executed runs again. Never a second run of a decided request.
	t.Run("OperatorDecisions", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{
			policy: ops.Policy{Effect: ops.EffectUnknownOutcome, Lease: 200 * time.Millisecond},
			handler: func(b *bundle, w http.ResponseWriter, _ *http.Request) {
				if b.calls.Add(1) <= 3 {
					w.WriteHeader(http.StatusInternalServerError) // outcome unknown
					return
				}
				w.WriteHeader(http.StatusCreated)
			},
		})
		operator := dbtest.NewPerson(t, b.db, "operator", "acme")
		decide := func(k, decision, ref string) {
			t.Helper()
			require.Equal(t, http.StatusInternalServerError, b.do(t, call{key: key(strconv.Quote(k))}).status)
			var id, version int64
			require.Eventually(t, func() bool {
				err := b.db.Admin.QueryRow(t.Context(), `SELECT id, version FROM opsdesk.operations
WHERE key = $1 AND state = 'pending' AND lease_expires_at <= now()`, k).Scan(&id, &version)
				return err == nil
			}, 10*time.Second, 20*time.Millisecond)
			var outcome string
			require.NoError(t, operator.Pool.QueryRow(t.Context(), `SELECT outcome FROM opsdesk.decide(p_id => $1, p_decision => $2,
p_expect_version => $3, p_reason => 'checked the ledger', p_result_ref => nullif($4, ''))`, id, decision, version, ref).Scan(&outcome))
			require.Equal(t, "succeeded", outcome)
		}
		decide("confirmed", "completed", "pay-77")
		p := problem(t, b.do(t, call{key: key(`"confirmed"`)}), http.StatusGone, idemhttp.TypeAnswerNotKept, false)
		require.Equal(t, "pay-77", p.Reference)
		decide("failed", "failed", "")
		problem(t, b.do(t, call{key: key(`"failed"`)}), http.StatusGone, idemhttp.TypeFailed, false)
		require.EqualValues(t, 2, b.calls.Load(), "decided requests do not run again")
		decide("released", "not-executed", "")
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(`"released"`)}).status, "not executed: the retry runs it")
		require.EqualValues(t, 4, b.calls.Load())
	})

	t.Run("TenantTheStoreRefuses", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{opts: idemhttp.Config{Tenant: func(*http.Request) (string, error) { return "bad\ttenant", nil }}})
		problem(t, b.do(t, call{key: key(`"k"`)}), http.StatusBadRequest, idemhttp.TypeRequestInvalid, false)
		require.Zero(t, b.calls.Load())
	})
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	store, err := ops.New(d.Service, ops.Config{Tools: map[string]ops.Policy{
		tool: {Effect: ops.EffectUnknownOutcome}, "create-ticket": {Effect: ops.EffectLocal}}})
	require.NoError(t, err)
	for _, tc := range []struct {
		opts idemhttp.Config
		want string
	}{
		{idemhttp.Config{Tenant: tenantOf}, "Tool is required"},
		{idemhttp.Config{Tool: tool}, "Tenant is required"},
		{idemhttp.Config{Tool: tool, Tenant: tenantOf, MaxBody: -1}, "negative"},
		{idemhttp.Config{Tool: tool, Tenant: tenantOf, Methods: []string{""}}, "empty method"},
		{idemhttp.Config{Tool: tool, Tenant: tenantOf, TypicalDuration: -time.Second}, "TypicalDuration -1s is negative"},
		// Every request would be refused 500 misconfigured: refused now.
		{idemhttp.Config{Tool: "create-paymnet", Tenant: tenantOf}, `"create-paymnet" has no policy in the store`},
		{idemhttp.Config{Tool: "create-ticket", Tenant: tenantOf}, `"create-ticket" has effect "local"`},
	} {
		_, err := idemhttp.New(store, tc.opts)
		require.ErrorContains(t, err, tc.want)
	}
	_, err = idemhttp.New(nil, idemhttp.Config{Tool: tool, Tenant: tenantOf})
	require.ErrorContains(t, err, "nil store")
}

// A record a superuser or a restored backup gave an infinite time answers
// its retries as any other record does (issue 18 §2): they got 503 and
// "retry with the same key" for ever, since the store could not be read.
func TestRecordWithInfiniteTimes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{handler: func(b *bundle, w http.ResponseWriter, r *http.Request) {
		if b.calls.Load() == 0 { // the first request's answer is lost
			b.calls.Add(1)
			w.WriteHeader(http.StatusCreated)
			panic(http.ErrAbortHandler)
		}
		createPayment(b, w, r)
	}})
	b.dropped(t, `"lost"`) // first: a reused connection would be retried by net/http
	first := b.do(t, call{key: key(`"kept"`)})
	require.Equal(t, http.StatusCreated, first.status, "%s", first.body)
	_, err := b.db.Admin.Exec(t.Context(), `UPDATE opsdesk.operations
SET completed_at = '-infinity', expires_at = 'infinity', lease_expires_at = 'infinity' WHERE key IN ('kept', 'lost')`)
	require.NoError(t, err)

	again := b.do(t, call{key: key(`"kept"`)})
	require.Equal(t, http.StatusCreated, again.status, "%s", again.body)
	require.Equal(t, first.body, again.body)
	require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader))
	// Nobody holds a lease that never ends: a person must find out.
	problem(t, b.do(t, call{key: key(`"lost"`)}), http.StatusConflict, idemhttp.TypeNeedsReconciliation, false)
	require.EqualValues(t, 2, b.calls.Load())
}
