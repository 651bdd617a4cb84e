package ops

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Fingerprint is the SHA-256 of an operation's canonical intent.
type Fingerprint [sha256.Size]byte

// Short is the prefix people compare: "sha256:" and 12 hex digits.
func (f Fingerprint) Short() string { return "sha256:" + hex.EncodeToString(f[:6]) }

func (f Fingerprint) String() string { return "sha256:" + hex.EncodeToString(f[:]) }

// canonicalEnvelope is what the fingerprint covers. The key is not in it:
// the key identifies the intent, it is not part of it.
type canonicalEnvelope struct {
	Tool    string `json:"tool"`
	Version string `json:"version"`
	Intent  any    `json:"intent"`
}

// Canonical returns the RFC 8785 (JCS) canonical JSON of
// {tool, version, intent} and its SHA-256. Field order, whitespace and
// string escapes in the intent do not change it. An intent the store
// cannot hold (U+0000 in any string or key) or compare exactly (numbers of
// magnitude 2^53 or more) is an *InvalidRequestError.
func Canonical(tool, version string, intent any) ([]byte, Fingerprint, error) {
	return canonical(tool, version, intent, 0)
}

// canonicalGrowth bounds how much longer the canonical form can be than
// encoding/json's: a number such as 1e15 is written out in full (16
// digits for 4 characters), and everything else keeps or loses length.
const canonicalGrowth = 4

// canonical is Canonical with a size limit (0: none) in canonical bytes.
// An intent far over the limit is refused once encoded, before the costlier
// canonicalization.
func canonical(tool, version string, intent any, maxBytes int) ([]byte, Fingerprint, error) {
	raw, err := json.Marshal(canonicalEnvelope{Tool: tool, Version: version, Intent: intent})
	if err != nil {
		return nil, Fingerprint{}, &InvalidRequestError{Field: "intent", Problem: "cannot be encoded as JSON: " + trimPrefix(err.Error(), "json: "), Err: err}
	}
	if maxBytes > 0 && len(raw) > canonicalGrowth*maxBytes {
		return nil, Fingerprint{}, tooLargeIntent(len(raw), "as JSON", maxBytes)
	}
	// Canonicalize in place (raw is ours): RFC 8785, as gowebpki/jcs did
	// (ops/canonical_vectors_test.go pins it), in a third of the CPU and one
	// allocation instead of about sixty.
	canon := jsontext.Value(raw)
	if err := canon.Canonicalize(); err != nil {
		return nil, Fingerprint{}, &InvalidRequestError{Field: "intent", Problem: "cannot be canonicalized: " + trimPrefix(err.Error(), "jsontext: "), Err: err}
	}
	if maxBytes > 0 && len(canon) > maxBytes {
		return nil, Fingerprint{}, tooLargeIntent(len(canon), "in canonical form", maxBytes)
	}
	if err := checkCanonical(canon); err != nil {
		return nil, Fingerprint{}, err
	}
	return canon, sha256.Sum256(canon), nil
}

func tooLargeIntent(n int, form string, maxBytes int) error {
	return &InvalidRequestError{Field: "intent", Problem: fmt.Sprintf(
		"is %d bytes %s, over the limit of %d in canonical form (Config.MaxIntentBytes)", n, form, maxBytes)}
}

// maxSafeNumber is 2^53: above it, neighbouring integers share a double.
const maxSafeNumber = 1 << 53

// checkCanonical refuses what canonical JSON may hold but an intent must
// not:
//   - numbers of magnitude 2^53 or more. RFC 8785 reads every number as an
//     IEEE 754 double, so 9007199254740993 and 9007199254740992
//     canonicalize alike and a changed intent would pass as a replay.
//     Below 2^53 every integer is exact.
//   - U+0000 in a string or an object key, which PostgreSQL cannot store:
//     the reservation would fail after the call had begun.
//
// It scans the canonical form (valid UTF-8 JSON, numbers in ECMAScript
// form, U+0000 written as \u0000) instead of decoding it: this runs on
// every call.
func checkCanonical(canon []byte) error {
	for i := 0; i < len(canon); i++ {
		switch c := canon[i]; {
		case c == '"':
			// Skip the string; an escaped quote is preceded by a backslash.
			for i++; i < len(canon) && canon[i] != '"'; i++ {
				if canon[i] == '\\' {
					if bytes.HasPrefix(canon[i:], []byte(nulEscape)) {
						return &InvalidRequestError{Field: "intent", Problem: "contains U+0000 (\\u0000), which the store cannot hold; " +
							"remove it, or send binary data encoded (base64)"}
					}
					i++
				}
			}
		case c == '-' || ('0' <= c && c <= '9'):
			start := i
			for i+1 < len(canon) && strings.IndexByte("0123456789.eE+-", canon[i+1]) >= 0 {
				i++
			}
			n := canon[start : i+1]
			if len(n) < 16 { // too short to reach 2^53 ≈ 9.007e15 but for an exponent
				if bytes.IndexAny(n, "eE") < 0 {
					continue
				}
			}
			if f, err := strconv.ParseFloat(string(n), 64); err != nil || math.Abs(f) >= maxSafeNumber {
				return &InvalidRequestError{Field: "intent", Problem: fmt.Sprintf(
					"number %s is too large to compare exactly (magnitude 2^53 or more); send it as a string", n)}
			}
		}
	}
	return nil
}
