package idemhttp_test

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/idemhttp"
)

// TestEncryptedStoreReplaysExactly: with the store's values sealed at
// rest (ops.Config.Keyring), a replay is still the first answer to the
// byte (odd JSON spacing, escapes, raw binary), and the table holds no
// plaintext of the request or the answer.
func TestEncryptedStoreReplaysExactly(t *testing.T) {
	t.Parallel()
	b := &bundle{db: dbtest.New(t)}
	kr, err := ops.NewLocalKeyring("k1", []string{"fp"},
		map[string][]byte{"k1": bytes.Repeat([]byte{3}, ops.KeyBytes), "fp": bytes.Repeat([]byte{4}, ops.KeyBytes)})
	require.NoError(t, err)
	store, err := ops.New(b.db.Service, ops.Config{Tools: map[string]ops.Policy{tool: {Effect: ops.EffectUnknownOutcome}},
		Owner: "api-1", Keyring: kr})
	require.NoError(t, err)
	m, err := idemhttp.New(store, idemhttp.Config{Tool: tool, Tenant: tenantOf})
	require.NoError(t, err)
	binary := append([]byte("secret-binary\x00\xff\xfe"), bytes.Repeat([]byte{0x80}, 100)...)
	mux := http.NewServeMux()
	mux.Handle("/payments", m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { createPayment(b, w, r) })))
	mux.Handle("/blobs", m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(binary)
	})))
	b.srv = httptest.NewUnstartedServer(mux)
	b.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	b.srv.Start()
	t.Cleanup(b.srv.Close)

	for _, c := range []call{
		{path: "/payments", key: key(`"pay-1"`), body: `{"amount": 4200, "card": "4242-secret"}`, contentType: "application/json"},
		{path: "/blobs", key: key(`"blob-1"`), body: `{"name": "secret-blob"}`, contentType: "application/json"},
	} {
		first := b.do(t, c)
		require.Less(t, first.status, 300, "%s", first.body)
		again := b.do(t, c)
		require.Equal(t, first.status, again.status)
		require.Equal(t, first.body, again.body, "the replay is the first answer to the byte")
		require.Equal(t, "true", again.header.Get(idemhttp.DefaultReplayHeader))
	}
	require.EqualValues(t, 2, b.calls.Load(), "each handler ran once")

	var dump string
	require.NoError(t, b.db.Admin.QueryRow(t.Context(), `SELECT string_agg(row_to_json(o)::text, E'\n') FROM opsdesk.operations o`).Scan(&dump))
	require.Contains(t, dump, `"opsdesk":"encrypted"`)
	require.NotContains(t, dump, "secret")
	require.NotContains(t, dump, "4200")
}
