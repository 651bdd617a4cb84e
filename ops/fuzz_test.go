package ops_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/opsdesk/opsdesk/ops"
)

// FuzzCanonical checks that canonicalization never panics, is idempotent,
// and that any re-encoding of an accepted intent (other whitespace, key
// order, escapes) has the same fingerprint. `go test` runs the seeds;
// `make fuzz` explores.
func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{
		`{"title":"Printer on fire","priority":2}`,
		`{"priority":2,"title":"Printer on fire"}`,
		`{"b":[1,2,{"z":null,"a":true}],"a":"\u00e9\ud83d\ude00"}`,
		`{"n":1e21,"m":-0,"f":0.1,"g":1.0000000000000002}`,
		`{"big":9007199254740993}`,
		`{"dup":1,"dup":2}`,
		`["\u0000","\"","\\","/","\b\f\n\r\t"]`,
		`{"€":1,"a":2,"\u20ac":3}`,
		`null`,
		`"plain"`,
		`{"deep":{"deeper":{"deepest":[[[]]]}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		canon, fp, err := ops.Canonical("tool", "1", json.RawMessage(raw))
		if err != nil {
			return // refused input: only "no panic" is asked of it
		}
		// Idempotent: the canonical form's intent canonicalizes to itself.
		var env struct {
			Intent json.RawMessage `json:"intent"`
		}
		if err := json.Unmarshal(canon, &env); err != nil {
			t.Fatalf("canonical form %q is not JSON: %v", canon, err)
		}
		canon2, fp2, err := ops.Canonical("tool", "1", env.Intent)
		if err != nil || fp2 != fp || !bytes.Equal(canon, canon2) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", raw, canon, canon2, err)
		}
		// Re-encoded by another encoder (sorted keys, indentation, HTML
		// escapes): the same fingerprint.
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("accepted %q that encoding/json rejects: %v", raw, err)
		}
		re, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return // NaN-free, but defensive
		}
		_, fp3, err := ops.Canonical("tool", "1", json.RawMessage(re))
		if err != nil {
			t.Fatalf("re-encoding %q of accepted %q refused: %v", re, raw, err)
		}
		if fp3 != fp {
			t.Fatalf("re-encoding changed the fingerprint: %q vs %q", raw, re)
		}
	})
}

func TestCanonicalNumbers(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		`{"n":9007199254740991}`:    true, // 2^53 - 1
		`{"n":-9007199254740991}`:   true,
		`{"n":123456789012345.5}`:   true,
		`{"n":1e-300}`:              true,
		`{"s":"9007199254740993"}`:  true, // large numbers travel as strings
		`{"n":9007199254740992}`:    false,
		`{"n":-9007199254740993}`:   false,
		`{"n":1e16}`:                false,
		`{"n":1.5e300}`:             false,
		`{"a":[1,{"b":[2,1e400]}]}`: false,
	} {
		_, _, err := ops.Canonical("tool", "1", json.RawMessage(raw))
		if ok && err != nil {
			t.Errorf("%s refused: %v", raw, err)
		}
		if !ok && !errors.Is(err, ops.ErrInvalidRequest) {
			t.Errorf("%s accepted (err %v), want ErrInvalidRequest", raw, err)
		}
	}
}
