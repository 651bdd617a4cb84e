package idemhttp_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
)

// sizedAnswer serves status (from the X-Status header, default 201) with a
// binary body of X-Size bytes (not UTF-8) and a Location of X-Location
// bytes, and records what Write returned.
func sizedAnswer(writeErrs *sync.Map) func(b *bundle, w http.ResponseWriter, r *http.Request) {
	return func(b *bundle, w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		size, _ := strconv.Atoi(r.Header.Get("X-Size"))
		status, _ := strconv.Atoi(r.Header.Get("X-Status"))
		if status == 0 {
			status = http.StatusCreated
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if n, _ := strconv.Atoi(r.Header.Get("X-Location")); n > 0 {
			w.Header().Set("Location", "/"+strings.Repeat("l", n))
		}
		w.WriteHeader(status)
		// In two writes, as a handler that streams would.
		body := binaryBody(size)
		_, err1 := w.Write(body[:size/2])
		_, err2 := w.Write(body[size/2:])
		writeErrs.Store(r.Header.Get(idemhttp.KeyHeader), errors.Join(err1, err2))
	}
}

// writeErr is what the handler's writes returned for the key.
func writeErr(t *testing.T, errs *sync.Map, k string) error {
	t.Helper()
	v, ok := errs.Load(k)
	require.True(t, ok, "the handler ran for %s", k)
	err, _ := v.(error)
	return err
}

// binaryBody is n bytes holding every byte value, invalid UTF-8 included.
func binaryBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 0x80)
	}
	return b
}

func sized(k string, size int, extra ...string) call {
	h := http.Header{"X-Size": {strconv.Itoa(size)}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return call{key: key(k), header: h}
}

// TestAnswerLimit (issue 19 §2): an answer up to Config.MaxAnswer is kept
// and replayed byte for byte; one byte more is refused at once, to the
// first client as to its retries. An 800 KiB answer got 201, and its retry
// 410.
func TestAnswerLimit(t *testing.T) {
	t.Parallel()

	t.Run("DefaultStore", func(t *testing.T) {
		t.Parallel()
		var errs sync.Map
		b := setup(t, setupOpts{handler: sizedAnswer(&errs)})

		// Exactly at the limit: sent, kept, and replayed exact to the byte.
		at := sized(`"at"`, idemhttp.DefaultMaxAnswer, "X-Location", "100")
		first := b.do(t, at)
		require.Equal(t, http.StatusCreated, first.status)
		require.True(t, bytes.Equal(binaryBody(idemhttp.DefaultMaxAnswer), first.body))
		require.NoError(t, writeErr(t, &errs, `"at"`))
		again := b.do(t, at)
		require.Equal(t, http.StatusCreated, again.status)
		require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader))
		require.True(t, bytes.Equal(first.body, again.body), "the replay is exact to the byte")
		require.Equal(t, first.header.Get("Content-Type"), again.header.Get("Content-Type"))
		require.Equal(t, first.header.Get("Location"), again.header.Get("Location"))

		// One byte over, and 800 KiB: refused to the first client, in the
		// terms its retries get; the handler's Write said so.
		for _, size := range []int{idemhttp.DefaultMaxAnswer + 1, 800 << 10} {
			k := fmt.Sprintf(`"over-%d"`, size)
			p := problem(t, b.do(t, sized(k, size)), http.StatusInternalServerError, idemhttp.TypeAnswerTooLarge, false)
			require.Contains(t, p.Detail, "took effect")
			require.Contains(t, p.Detail, strconv.Itoa(idemhttp.DefaultMaxAnswer))
			require.ErrorIs(t, writeErr(t, &errs, k), idemhttp.ErrAnswerTooLarge)
			p = problem(t, b.do(t, sized(k, size)), http.StatusGone, idemhttp.TypeAnswerNotKept, false)
			require.Contains(t, p.Detail, "Config.MaxAnswer")
		}
		require.EqualValues(t, 3, b.calls.Load(), "no request ran twice")
		require.Equal(t, 2, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE state = 'completed' AND outcome = 'succeeded' AND result->>'not_kept' IS NOT NULL`))
	})

	// A refusal over the limit says what its retries get.
	t.Run("Verdicts", func(t *testing.T) {
		t.Parallel()
		var errs sync.Map
		b := setup(t, setupOpts{opts: idemhttp.Config{MaxAnswer: 100}, handler: sizedAnswer(&errs)})
		rejected := sized(`"rejected"`, 101, "X-Status", "402")
		problem(t, b.do(t, rejected), http.StatusInternalServerError, idemhttp.TypeAnswerTooLarge, false)
		problem(t, b.do(t, rejected), http.StatusGone, idemhttp.TypeFailed, false)

		busy := sized(`"busy"`, 101, "X-Status", "503")
		problem(t, b.do(t, busy), http.StatusInternalServerError, idemhttp.TypeAnswerTooLarge, true)
		problem(t, b.do(t, busy), http.StatusInternalServerError, idemhttp.TypeAnswerTooLarge, true)
		require.EqualValues(t, 3, b.calls.Load(), "the key was released: the retry ran again")

		// Chosen headers over MaxStoredHeaderBytes cannot be kept either.
		long := sized(`"long-location"`, 10, "X-Location", strconv.Itoa(idemhttp.MaxStoredHeaderBytes))
		p := problem(t, b.do(t, long), http.StatusInternalServerError, idemhttp.TypeAnswerTooLarge, false)
		require.Contains(t, p.Detail, "headers")
		problem(t, b.do(t, long), http.StatusGone, idemhttp.TypeAnswerNotKept, false)

		// At MaxAnswer, kept.
		require.Equal(t, http.StatusCreated, b.do(t, sized(`"at"`, 100)).status)
		require.True(t, bytes.Equal(binaryBody(100), b.do(t, sized(`"at"`, 100)).body))
	})

	// A store that holds less gives a smaller default, exactly usable.
	t.Run("SmallStore", func(t *testing.T) {
		t.Parallel()
		var errs sync.Map
		b := setup(t, setupOpts{maxResult: 8192, handler: sizedAnswer(&errs)})
		const capacity = (8192 - idemhttp.MaxStoredHeaderBytes - 34) / 4 * 3
		at := sized(`"at"`, capacity, "X-Location", "3000")
		require.Equal(t, http.StatusCreated, b.do(t, at).status)
		again := b.do(t, at)
		require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader), "%s", again.body)
		require.True(t, bytes.Equal(binaryBody(capacity), again.body))
		problem(t, b.do(t, sized(`"over"`, capacity+1)), http.StatusInternalServerError, idemhttp.TypeAnswerTooLarge, false)
	})
}

// TestNewRefusesAnswerLimitsTheStoreCannotHold: MaxAnswer is a promise the
// store must be able to keep.
func TestNewRefusesAnswerLimitsTheStoreCannotHold(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	policies := map[string]ops.Policy{tool: {Effect: ops.EffectUnknownOutcome}}
	small, err := ops.New(d.Service, ops.Config{Tools: policies, MaxResultBytes: 8192})
	require.NoError(t, err)
	const capacity = (8192 - idemhttp.MaxStoredHeaderBytes - 34) / 4 * 3
	_, err = idemhttp.New(small, idemhttp.Config{Tool: tool, Tenant: tenantOf, MaxAnswer: capacity})
	require.NoError(t, err)
	_, err = idemhttp.New(small, idemhttp.Config{Tool: tool, Tenant: tenantOf, MaxAnswer: capacity + 1})
	require.ErrorContains(t, err, "MaxAnswer")
	_, err = idemhttp.New(small, idemhttp.Config{Tool: tool, Tenant: tenantOf, MaxAnswer: -1})
	require.ErrorContains(t, err, "negative")

	tiny, err := ops.New(d.Service, ops.Config{Tools: policies, MaxResultBytes: 4096})
	require.NoError(t, err)
	_, err = idemhttp.New(tiny, idemhttp.Config{Tool: tool, Tenant: tenantOf})
	require.ErrorContains(t, err, "cannot hold an answer")
}

// TestBodyLimit (issue 19 §2): MaxBody is the one limit on request bodies,
// JSON or not. JSON bodies over 256 KiB (the store's MaxIntentBytes) got
// 400 request-invalid naming Config.MaxIntentBytes.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{handler: func(b *bundle, w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "ran %d", b.calls.Add(1))
	}})
	jsonOf := func(n int) string { return `"` + strings.Repeat("x", n-2) + `"` }
	for _, tc := range []struct {
		name, contentType string
		body              func(n int) string
	}{
		{"JSON", "application/json", jsonOf},
		{"Binary", "application/octet-stream", func(n int) string { return string(binaryBody(n)) }},
	} {
		for _, size := range []int{300 << 10, 900 << 10, idemhttp.DefaultMaxBody} {
			k := key(fmt.Sprintf(`"%s-%d"`, tc.name, size))
			c := call{key: k, body: tc.body(size), contentType: tc.contentType}
			first := b.do(t, c)
			require.Equal(t, http.StatusOK, first.status, "%s %d: %s", tc.name, size, first.body)
			again := b.do(t, c)
			require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader), "%s %d: %s", tc.name, size, again.body)
			require.Equal(t, first.body, again.body)
		}
		over := call{key: key(`"over-` + tc.name + `"`), body: tc.body(idemhttp.DefaultMaxBody + 1), contentType: tc.contentType}
		p := problem(t, b.do(t, over), http.StatusRequestEntityTooLarge, idemhttp.TypeBodyTooLarge, false)
		require.Contains(t, p.Detail, strconv.Itoa(idemhttp.DefaultMaxBody))
	}
	require.EqualValues(t, 6, b.calls.Load())

	// JSON too large to keep in canonical form is fingerprinted by its
	// bytes: the same JSON spaced otherwise is another request.
	big := call{key: key(`"JSON-921600"`), body: jsonOf(900 << 10)}
	big.body = " " + big.body
	problem(t, b.do(t, big), http.StatusUnprocessableEntity, idemhttp.TypeKeyReused, false)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE key = 'JSON-921600' AND intent->'intent'->>'body_sha256' IS NOT NULL`))
	// Small JSON is still kept canonical.
	small := call{key: key(`"small"`), body: `{"b": 1, "a": 2}`}
	require.Equal(t, http.StatusOK, b.do(t, small).status)
	small.body = `{"a":2,"b":1}`
	require.Equal(t, "true", b.do(t, small).header.Get(idemhttp.DefaultReplayHeader))
}
