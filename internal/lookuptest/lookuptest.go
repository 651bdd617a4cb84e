// Package lookuptest is a provider for tests whose found answers name
// their reference in every way a JSON text can, faithful or hostile: one
// table, asked through every path that reads a lookup (reconcile.Ask, the
// bulk run of reconcile/bulk, opsdesk resolve), so that they all take the
// same reference, or refuse the same answers.
package lookuptest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Pointer is the catalog's result_ref for Serve's answers: two levels, so
// that a member duplicated at either one is on the pointer's path.
const Pointer = "/charge/ref"

// Answer is a found answer (HTTP 200) and what a lookup reading Pointer
// must make of it.
type Answer struct {
	// Key is the operation key the provider answers Body for.
	Key  string
	Body string
	// Ref is the reference the lookup must take, byte for byte; "" when
	// it must take none: the answer is found without a reference.
	Ref string
	// Rounded is what a decoder that reads numbers as float64 took for
	// Ref: confirming it contradicts the lookup. "" for strings.
	Rounded string
	// Says is what the lookup must say about an answer whose reference it
	// refuses, without quoting the reference.
	Says string
}

// deep nests an array deeper than encoding/json reads (10,000 levels).
var deep = `{"charge": {"ref": "CH-1"}, "x": ` + strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) + `}`

// longName is a member name of 400 KiB: an answer that names it twice
// is under the lookup's 1 MiB, and a message that quoted it would not be
// short.
var longName = strings.Repeat("n", 400<<10)

// Answers are the answers Serve gives, one an operation key.
var Answers = []Answer{
	{Key: "plain", Body: `{"charge": {"ref": "CH-ok"}}`, Ref: "CH-ok"},
	// A string's escapes are its encoding: the reference is its characters.
	{Key: "escaped", Body: `{"charge": {"ref": "CH-\u0031\/2"}}`, Ref: "CH-1/2"},

	// A number's reference is its text, as the provider wrote it.
	{Key: "2p53plus1", Body: `{"charge": {"ref": 9007199254740993}}`, Ref: "9007199254740993", Rounded: "9007199254740992"},
	{Key: "30digits", Body: `{"charge": {"ref": 123456789012345678901234567890}}`,
		Ref: "123456789012345678901234567890", Rounded: "123456789012345680000000000000"},
	{Key: "exponent", Body: `{"charge": {"ref": 1e21}}`, Ref: "1e21", Rounded: "1000000000000000000000"},
	{Key: "exponent-upper", Body: `{"charge": {"ref": 1E+21}}`, Ref: "1E+21", Rounded: "1000000000000000000000"},
	{Key: "negative-zero", Body: `{"charge": {"ref": -0.0}}`, Ref: "-0.0", Rounded: "-0"},
	{Key: "trailing-zero", Body: `{"charge": {"ref": 12.50}}`, Ref: "12.50", Rounded: "12.5"},
	// Exact, but longer than a decision records.
	{Key: "10000digits", Body: `{"charge": {"ref": 1` + strings.Repeat("0", 9_999) + `}}`,
		Says: "/charge/ref: the reference is 10000 bytes, over the 500 a decision records"},

	// A member named twice is read as the first by some decoders and as the
	// last by others: which one the provider meant is unknown, on the
	// pointer's path or anywhere else.
	{Key: "duplicate", Body: `{"charge": {"ref": "CH-first", "ref": "CH-second"}}`, Says: `names member "ref" twice in one object`},
	{Key: "duplicate-parent", Body: `{"charge": {"ref": "CH-first"}, "charge": {"ref": "CH-second"}}`,
		Says: `names member "charge" twice in one object`},
	{Key: "duplicate-escaped", Body: `{"charge": {"r\u0065f": "CH-first", "ref": "CH-second"}}`, Says: `names member "ref" twice in one object`},
	{Key: "duplicate-elsewhere", Body: `{"charge": {"ref": "CH-1"}, "meta": [{"a": {"id": 1, "id": 1}}]}`,
		Says: `names member "id" twice in one object`},
	{Key: "duplicate-long-name", Body: `{"charge": {"ref": "CH-1"}, "` + longName + `": 1, "` + longName + `": 2}`,
		Says: `names member "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"… (409600 bytes) twice in one object`},

	// Characters a decision would record but that are not the provider's
	// reference as it can be read back.
	{Key: "nul", Body: `{"charge": {"ref": "CH-\u00001"}}`, Says: "holds the control or invisible character U+0000"},
	{Key: "escape", Body: `{"charge": {"ref": "CH-1\u001b[31m"}}`, Says: "holds the control or invisible character U+001B"},
	{Key: "lone-surrogate", Body: `{"charge": {"ref": "CH-\ud800"}}`, Says: "holds U+FFFD"},
	{Key: "not-utf8", Body: "{\"charge\": {\"ref\": \"CH-\xff\"}}", Says: "the body is not JSON: it is not UTF-8"},

	{Key: "two-values", Body: `{"charge": {"ref": "CH-1"}} {"charge": {"ref": "CH-2"}}`, Says: "the body is not JSON"},
	{Key: "too-deep", Body: deep, Says: "the body nests deeper than 10000 levels"},
	{Key: "object", Body: `{"charge": {"ref": {"id": "CH-1"}}}`, Says: "/charge/ref is not a string or a number"},
}

// Serve starts a provider that answers each of Answers with HTTP 200 and
// its body at /lookup/{tenant}/{tool}/{key}, and any other key with 404.
// It returns the lookup's URL template; the provider closes when t ends.
func Serve(t testing.TB) string {
	t.Helper()
	bodies := make(map[string]string, len(Answers))
	for _, a := range Answers {
		bodies[a.Key] = a.Body
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/lookup/{tenant}/{tool}/{key}"
}
