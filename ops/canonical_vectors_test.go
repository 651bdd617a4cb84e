package ops_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops"
)

// TestCanonicalVectors pins canonical forms and fingerprints computed by
// the canonicalizer records were first written with (gowebpki/jcs, before
// the change to go-json-experiment's jsontext): a stored fingerprint must
// match its retry's for as long as records live, whatever library computes it.
func TestCanonicalVectors(t *testing.T) {
	t.Parallel()
	for _, v := range []struct{ intent, canon, fp string }{
		{`{"title":"Printer on fire","priority":2,"labels":["hardware","urgent"]}`,
			`{"intent":{"labels":["hardware","urgent"],"priority":2,"title":"Printer on fire"},"tool":"create-ticket","version":"v1"}`,
			"sha256:e9b5344dd55a907bce10619d9c80784f96e0a8cfba3d3ac368d950a4117b87d0"},
		// Keys sort by UTF-16 code units: U+10000 (a surrogate pair) before U+E000.
		{`{"b":[1,2,{"z":null,"a":true}],"a":"\u00e9\ud83d\ude00","€":1,"\ue000":2,"\ud800\udc00":3}`,
			"{\"intent\":{\"a\":\"é😀\",\"b\":[1,2,{\"a\":true,\"z\":null}],\"€\":1,\"𐀀\":3,\"\ue000\":2},\"tool\":\"create-ticket\",\"version\":\"v1\"}",
			"sha256:49ad81bf2422aa4cd71e1fbab917ea4fd67c51ea20b801d911d762ebf0916f90"},
		// Numbers in ECMAScript form: exponents, trailing zeros, negative zero.
		{`{"m":-0,"f":0.1,"g":1.0000000000000002,"h":[1E2,0.00001,123e-10,-1e-7,5e-324,333333333.33333329,4.50,2e-3,1e-300]}`,
			`{"intent":{"f":0.1,"g":1.0000000000000002,"h":[100,0.00001,1.23e-8,-1e-7,5e-324,333333333.3333333,4.5,0.002,1e-300],"m":0},"tool":"create-ticket","version":"v1"}`,
			"sha256:2c6c9a48a7079ba359dd3cad8afe529d79bd81e49771a7e07e180e99293a749a"},
	} {
		canon, fp, err := ops.Canonical("create-ticket", "v1", json.RawMessage(v.intent))
		require.NoError(t, err, v.intent)
		require.Equal(t, v.canon, string(canon), v.intent)
		require.Equal(t, v.fp, fp.String(), v.intent)
	}
}

// TestCanonicalRefusals: an intent RFC 8785 cannot give one form is refused
// with the place to fix, not hashed.
func TestCanonicalRefusals(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`{"dup":1,"dup":2}`:          `intent cannot be canonicalized: duplicate object member name "dup" within "/intent"`,
		`{"a":["x","\ud800"]}`:       `intent cannot be canonicalized: invalid surrogate pair`,
		`{"a":{"b":"\udc00\ud800"}}`: `within "/intent/a/b"`,
	} {
		_, _, err := ops.Canonical("tool", "1", json.RawMessage(raw))
		require.ErrorIs(t, err, ops.ErrInvalidRequest, raw)
		require.ErrorContains(t, err, want, raw)
		require.NotContains(t, err.Error(), "jsontext", raw)
	}
}
