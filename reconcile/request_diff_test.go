package reconcile_test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/reconcile"
)

func TestDiffRequests(t *testing.T) {
	t.Parallel()
	raw := func(s string) json.RawMessage {
		if s == "" {
			return nil
		}
		return json.RawMessage(s)
	}
	d := func(path string, kind reconcile.DiffKind, original, attempted string) reconcile.Diff {
		return reconcile.Diff{Path: path, Kind: kind, Original: raw(original), Attempted: raw(attempted)}
	}
	for _, tc := range []struct {
		name                string
		original, attempted string
		want                []reconcile.Diff
	}{
		{"Equal", `{"a":1,"b":[true,null]}`, `{"b":[true,null],"a":1}`, nil},
		{"OneValue", `{"intent":{"amount":100,"card":"4242"},"tool":"charge-card","version":"1"}`,
			`{"intent":{"amount":500,"card":"4242"},"tool":"charge-card","version":"1"}`,
			[]reconcile.Diff{d("/intent/amount", reconcile.DiffChanged, "100", "500")}},
		{"RemovedAndAddedInOrder", `{"a":1,"b":{"x":[1,2]},"c":3}`, `{"a":1,"c":4,"d":{"y":1}}`, []reconcile.Diff{
			d("/b", reconcile.DiffRemoved, `{"x":[1,2]}`, ""),
			d("/c", reconcile.DiffChanged, "3", "4"),
			d("/d", reconcile.DiffAdded, "", `{"y":1}`)}},
		{"TypeChangeIsOneDiff", `{"a":{"b":1}}`, `{"a":[1]}`, []reconcile.Diff{d("/a", reconcile.DiffChanged, `{"b":1}`, `[1]`)}},
		{"NullIsAValue", `{"a":null}`, `{}`, []reconcile.Diff{d("/a", reconcile.DiffRemoved, "null", "")}},
		{"ArraysItemByItem", `[1,2,3]`, `[1,5]`, []reconcile.Diff{
			d("/1", reconcile.DiffChanged, "2", "5"), d("/2", reconcile.DiffRemoved, "3", "")}},
		{"LongerArray", `[]`, `["x"]`, []reconcile.Diff{d("/0", reconcile.DiffAdded, "", `"x"`)}},
		{"NumbersByValue", `[1.0,1e2,-0]`, `[1,100,0]`, nil},
		{"NumbersOutOfRangeByText", `[1e400]`, `[2e400]`, []reconcile.Diff{d("/0", reconcile.DiffChanged, "1e400", "2e400")}},
		{"StringsByCharacters", `["\u0041","\/","a\"b","\u00e9\ud83d\ude00"]`, `["A","/","a\u0022b","é😀"]`, nil},
		{"InvalidUTF8AsReplacement", "[\"\xff\"]", `["\ufffd"]`, nil},
		{"EscapesAreCharacters", `["a\\b","a\nb"]`, `["a\\\\b","a\\nb"]`, []reconcile.Diff{
			d("/0", reconcile.DiffChanged, `"a\\b"`, `"a\\\\b"`), d("/1", reconcile.DiffChanged, `"a\nb"`, `"a\\nb"`)}},
		{"StringIsNotNumber", `["1"]`, `[1]`, []reconcile.Diff{d("/0", reconcile.DiffChanged, `"1"`, "1")}},
		{"TheLastDuplicateCounts", `{"a":1,"a":2}`, `{"a":2}`, nil},
		{"WholeValue", `1`, `"1"`, []reconcile.Diff{d("", reconcile.DiffChanged, "1", `"1"`)}},
		{"KeptText", "{ \"a\" : [ 1 , 2 ] }", `{"a":[1,3]}`, []reconcile.Diff{d("/a/1", reconcile.DiffChanged, "2", "3")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reconcile.DiffRequests(json.RawMessage(tc.original), json.RawMessage(tc.attempted))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	for _, bad := range []string{``, `{`, `{"a":1}x`, `{"a":1} {}`, `nul`} {
		_, err := reconcile.DiffRequests(json.RawMessage(bad), json.RawMessage(`{}`))
		require.Error(t, err, bad)
	}
}

// TestDiffReadsJSONAsEncodingJSON: the requests are read by opsdesk's own
// scanner (which copies nothing); what it takes and refuses is what
// encoding/json takes and refuses.
func TestDiffReadsJSONAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"a":[1,2,{"b":null}],"c":"\u00e9\n","":""}`, ` [ ] `, `{}`, `-0.5e+10`, `0`, `"\/"`, `true`, `false`, `null`,
		"\t{ \"a\" :\r\n1 }", `[1E5,-1.25E-3,0.0]`, "[\"\xff\"]",
		``, ` `, `{"a":1,}`, `[1,]`, `{"a" 1}`, `{,}`, `[,1]`, `{1:2}`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`, `+1`, `--1`,
		"\"\x01\"", `"\u12"`, `"\u12g4"`, `"\q"`, `"abc`, `"\`, `tru`, `nul`, `truex`, `[true false]`, `[1 2]`,
		`{"a":1 "b":2}`, `[]]`, `{}}`, `[}`, `{]`, `{"a":}`, `{"a"}`, `[1]x`, `1 2`, `{"a":1}{}`, `NaN`, `[-]`,
	} {
		_, err := reconcile.DiffRequests(json.RawMessage(in), json.RawMessage(in))
		require.Equal(t, json.Valid([]byte(in)), err == nil, "%q: %v", in, err)
	}
}

// TestDiffAndLinesCopyNoValueWhole: a service may store requests of any
// size. Diffing two of 8 MiB allocated 80 MiB (a json.Decoder buffered
// and decoded every value) and laying one out 56 MiB; now the diff copies
// nothing and the layout the large value's line once. Not parallel: it
// counts the process's allocations.
func TestDiffAndLinesCopyNoValueWhole(t *testing.T) {
	big := strings.Repeat("y", 8<<20)
	a := json.RawMessage(`{"intent":{"a":"` + big + `","k\u001b":1},"tool":"x","version":"1"}`)
	b := json.RawMessage(`{"intent":{"a":"` + big + `","k\u001b":2},"tool":"x","version":"1"}`)
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	var diffs []reconcile.Diff
	var err error
	n := allocated(func() { diffs, err = reconcile.DiffRequests(a, b) })
	require.NoError(t, err)
	require.Len(t, diffs, 1)
	require.Less(t, n, uint64(1<<20), "the diff allocated %d bytes", n)
	var lines []reconcile.RequestLine
	n = allocated(func() { lines, err = reconcile.RequestLines(a, diffs) })
	require.NoError(t, err)
	require.Len(t, lines, 8)
	require.Less(t, n, uint64(len(big)+1<<20), "the layout allocated %d bytes", n)
}

// Keys holding the pointer's own characters, dots, control characters or
// nothing at all each name one field: every path parses back to the keys
// it was made from.
func TestDiffPathsAreUnambiguous(t *testing.T) {
	t.Parallel()
	keys := []string{"a.b", "a/b", "a~1b", "~", "~0", "/", "", " ", "a\u001b[31mb", "\u009b2J", "a\"b", "é", "0"}
	var original, attempted strings.Builder
	original.WriteString(`{"a":{"b":0},`)
	attempted.WriteString(`{"a":{"b":0},`)
	for i, k := range keys {
		if i > 0 {
			original.WriteString(",")
			attempted.WriteString(",")
		}
		kj, err := json.Marshal(k)
		require.NoError(t, err)
		original.WriteString(string(kj) + ":1")
		attempted.WriteString(string(kj) + ":2")
	}
	original.WriteString("}")
	attempted.WriteString("}")
	diffs, err := reconcile.DiffRequests(json.RawMessage(original.String()), json.RawMessage(attempted.String()))
	require.NoError(t, err)
	require.Len(t, diffs, len(keys), "one difference per key, none for a/b the object")
	seen := map[string]bool{}
	for i, d := range diffs {
		require.False(t, seen[d.Path], "path %q twice", d.Path)
		seen[d.Path] = true
		tokens, err := reconcile.ParsePointer(d.Path)
		require.NoError(t, err)
		require.Equal(t, []string{keys[i]}, tokens, "path %q", d.Path)
	}
	require.Equal(t, "/a~1b", diffs[1].Path)
	require.Equal(t, "/a~01b", diffs[2].Path)
	require.Equal(t, "/", diffs[6].Path, "the empty key")

	for _, bad := range []string{"a", "/~", "/~2", "/a~"} {
		_, err := reconcile.ParsePointer(bad)
		require.Error(t, err, bad)
	}
}

// Nesting far deeper than encoding/json decodes (10,000) is compared and
// laid out without recursion.
func TestDiffDeepNesting(t *testing.T) {
	t.Parallel()
	const depth = 200_000
	nested := func(leaf string) json.RawMessage {
		return json.RawMessage(strings.Repeat("[", depth) + leaf + strings.Repeat("]", depth))
	}
	diffs, err := reconcile.DiffRequests(nested("1"), nested("2"))
	require.NoError(t, err)
	require.Len(t, diffs, 1)
	require.Equal(t, strings.Repeat("/0", depth), diffs[0].Path)
	lines, err := reconcile.RequestLines(nested("2"), diffs)
	require.NoError(t, err)
	require.Len(t, lines, 2*depth+1)
	leaf := lines[depth]
	require.Equal(t, reconcile.RequestLine{Depth: depth, Text: "2", Mark: reconcile.DiffChanged}, leaf)
	require.Empty(t, lines[depth-1].Mark)
}

func TestRequestLines(t *testing.T) {
	t.Parallel()
	original := json.RawMessage(`{"intent":{"amount":100,"card":"4242","tags":[]},"tool":"charge-card","version":"1"}`)
	attempted := json.RawMessage(`{"intent":{"amount":500,"items":[{"sku":"a"}],"tags":[]},"tool":"charge-card","version":"1"}`)
	diffs, err := reconcile.DiffRequests(original, attempted)
	require.NoError(t, err)
	type line = reconcile.RequestLine
	lines, err := reconcile.RequestLines(original, diffs)
	require.NoError(t, err)
	require.Equal(t, []line{
		{Depth: 0, Text: "{"},
		{Depth: 1, Text: `"intent": {`},
		{Depth: 2, Text: `"amount": 100,`, Mark: reconcile.DiffChanged},
		{Depth: 2, Text: `"card": "4242",`, Mark: reconcile.DiffRemoved},
		{Depth: 2, Text: `"tags": []`},
		{Depth: 1, Text: "},"},
		{Depth: 1, Text: `"tool": "charge-card",`},
		{Depth: 1, Text: `"version": "1"`},
		{Depth: 0, Text: "}"},
	}, lines)
	lines, err = reconcile.RequestLines(attempted, diffs)
	require.NoError(t, err)
	require.Equal(t, []line{
		{Depth: 0, Text: "{"},
		{Depth: 1, Text: `"intent": {`},
		{Depth: 2, Text: `"amount": 500,`, Mark: reconcile.DiffChanged},
		{Depth: 2, Text: `"items": [`, Mark: reconcile.DiffAdded},
		{Depth: 3, Text: `{`, Mark: reconcile.DiffAdded},
		{Depth: 4, Text: `"sku": "a"`, Mark: reconcile.DiffAdded},
		{Depth: 3, Text: `}`, Mark: reconcile.DiffAdded},
		{Depth: 2, Text: `],`, Mark: reconcile.DiffAdded},
		{Depth: 2, Text: `"tags": []`},
		{Depth: 1, Text: "},"},
		{Depth: 1, Text: `"tool": "charge-card",`},
		{Depth: 1, Text: `"version": "1"`},
		{Depth: 0, Text: "}"},
	}, lines)

	// Keys are written as JSON: a control character stays escaped.
	lines, err = reconcile.RequestLines(json.RawMessage(`{"a\u001bb<":"\u001b"}`), nil)
	require.NoError(t, err)
	require.Equal(t, `"a\u001bb<": "\u001b"`, lines[1].Text)
	_, err = reconcile.RequestLines(json.RawMessage(`{}`), []reconcile.Diff{{Path: "no slash"}})
	require.Error(t, err)
}
