package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// TestSplicerWritesWhatWriteJSONWould: held values go out in place of
// their placeholders, escaped as writeJSON escapes, slice by slice with no
// character split between two slices; the output is the same JSON value.
func TestSplicerWritesWhatWriteJSONWould(t *testing.T) {
	t.Parallel()
	// Characters of two and three bytes across every slice's end, C1
	// controls and a bidi override among them.
	long := `{"v":"` + strings.Repeat("é\u009b\u202e€", spliceSlice/3) + `"}`
	type doc struct {
		Tenant string            `json:"tenant"`
		Values []json.RawMessage `json:"values"`
		None   json.RawMessage   `json:"none"`
	}
	v := doc{Tenant: "acme\u009b", Values: []json.RawMessage{json.RawMessage(long), json.RawMessage(`[1,2]`)}}
	var want bytes.Buffer
	require.NoError(t, writeJSON(&want, v))

	var s splicer
	held := doc{Tenant: v.Tenant, Values: []json.RawMessage{s.hold(v.Values[0]), s.hold(v.Values[1])}, None: s.hold(nil)}
	var got bytes.Buffer
	require.NoError(t, s.write(&got, held))
	requireClean(t, "spliced", got.String())
	require.NotContains(t, got.String(), "\u202e")
	require.NotContains(t, got.String(), s.nonce)
	var a, b any
	require.NoError(t, json.Unmarshal(want.Bytes(), &a))
	require.NoError(t, json.Unmarshal(got.Bytes(), &b))
	require.Equal(t, a, b)
	require.Contains(t, got.String(), `"values": [
    {"v":"é\u009b\u202e€é`, "the held value as it was, escaped")
}

// TestRevealsAllocateASmallMultipleOfTheValue: revealing a conflict of two
// 8 MiB requests allocated 299 MiB for its text and 266 MiB for its JSON
// (each request decoded five times, encoded, indented, escaped and copied
// whole), and ops reveal 32 MiB for an 8 MiB result. Now fetching the
// requests is most of it, and a revealed value streams. Not parallel: it
// counts the process's allocations.
func TestRevealsAllocateASmallMultipleOfTheValue(t *testing.T) {
	_, d := storeConfig(t)
	operator := dbtest.NewPerson(t, d, "operator", "*")
	cfg := personConfig(t, operator, "")
	const size = 8 << 20
	value := strings.Repeat("a", size)
	id, _ := libraryConflictUpTo(t, d, 4*size, "acme", "big-1", `{"a":"`+value+`","n":1}`, `{"a":"`+value+`","n":2}`)
	var result int64
	require.NoError(t, d.Service.QueryRow(t.Context(), `
INSERT INTO opsdesk.operations (tenant, tool, key, tool_version, fingerprint, effect, state, outcome, owner, attempt,
    leased_at, lease_expires_at, completed_at, expires_at, result)
VALUES ('acme', 'create-ticket', 'big-result', '1', decode(repeat('0c', 32), 'hex'), 'local', 'completed', 'succeeded', 'worker-1', 1,
    now(), now(), now(), now() + interval '1 day', json_build_object('v', repeat('r', $1))) RETURNING id`, size).Scan(&result))

	for _, tc := range []struct {
		args []string
		max  uint64 // bytes
	}{
		{[]string{"conflicts", "show", id, "--reveal", "--reason", "r"}, 5 * 2 * size},
		{[]string{"conflicts", "show", id, "--reveal", "--reason", "r", "-o", "json"}, 4 * 2 * size},
		{[]string{"ops", "reveal", strconv.FormatInt(result, 10), "--reason", "r"}, 2 * size},
		{[]string{"ops", "reveal", strconv.FormatInt(result, 10), "--reason", "r", "-o", "json"}, 2 * size},
	} {
		var before, after runtime.MemStats
		var errOut bytes.Buffer
		runtime.GC()
		runtime.ReadMemStats(&before)
		code := Main(append(tc.args, "--config", cfg), io.Discard, &errOut)
		runtime.ReadMemStats(&after)
		require.Equal(t, ExitOK, code, errOut.String())
		n := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d MiB allocated", strings.Join(tc.args, " "), n>>20)
		require.Less(t, n, tc.max, "%s allocated %d MiB", strings.Join(tc.args, " "), n>>20)
	}
	// The streamed JSON is one whole value, the stored one in it.
	var out, errOut bytes.Buffer
	code := Main([]string{"ops", "reveal", strconv.FormatInt(result, 10), "--reason", "r", "-o", "json", "--config", cfg}, &out, &errOut)
	require.Equal(t, ExitOK, code, errOut.String())
	var doc struct {
		Value struct{ V string } `json:"value"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	require.Equal(t, strings.Repeat("r", size), doc.Value.V)
}
