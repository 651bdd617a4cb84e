package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/opsdesk/opsdesk/ops"
)

// requestIntent is what a request's fingerprint covers: the library hashes
// the RFC 8785 canonical JSON of {tool, version, intent}. The key is not
// in it; the tenant and tool are in the identity.
type requestIntent struct {
	Method string `json:"method"`
	// Path is the escaped path: /a%2Fb and /a/b are different requests.
	Path  string `json:"path"`
	Query string `json:"query,omitempty"`
	// Body is a JSON body, canonicalized with the rest: the order of
	// members, whitespace and string escapes do not change the
	// fingerprint. It is stored with the record, where operators can
	// reveal it (audited) when they reconcile.
	Body json.RawMessage `json:"body,omitempty"`
	// Any other body is fingerprinted by its media type and the SHA-256 of
	// its bytes.
	ContentType string `json:"content_type,omitempty"`
	BodySHA256  string `json:"body_sha256,omitempty"`
}

// errNotJSON is a body whose Content-Type says JSON but which is not JSON.
var errNotJSON = errors.New("the body is not valid JSON (UTF-8), but its Content-Type says it is")

// intentOf builds the fingerprinted intent of a request with body, within
// maxIntent canonical bytes (the store's Config.MaxIntentBytes), without
// the JSON values the ignore pointers name.
func intentOf(r *http.Request, body []byte, tool, version string, maxIntent int, ignore [][]string) (requestIntent, error) {
	in := requestIntent{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery}
	ct := r.Header.Get("Content-Type")
	// JSON would turn invalid UTF-8 into U+FFFD, and two different
	// requests into one fingerprint.
	switch {
	case !utf8.ValidString(in.Query):
		return in, errors.New("the query is not valid UTF-8; percent-encode it")
	case len(body) == 0:
		return in, nil
	case !utf8.ValidString(ct):
		return in, errors.New("the Content-Type header is not valid UTF-8")
	}
	mediaType, params, err := mime.ParseMediaType(ct)
	if err == nil {
		ct = mime.FormatMediaType(mediaType, params)
	}
	if err == nil && isJSON(mediaType) {
		if !utf8.Valid(body) || !json.Valid(body) {
			return in, errNotJSON
		}
		in.Body = body
		// JSON the library cannot canonicalize exactly (numbers of 2^53
		// or more, duplicate member names, lone surrogates) or the store
		// cannot hold (\u0000) is fingerprinted by its bytes instead: a
		// retry must then send the same bytes, never a different
		// request that canonicalizes alike. So is JSON too large for the
		// store to keep in canonical form: Config.MaxBody, not the
		// store's MaxIntentBytes, bounds what a client may send.
		canon, _, err := ops.Canonical(tool, version, in)
		exact := err == nil && !hasEscapedNUL(canon)
		if exact && len(ignore) > 0 {
			// Only JSON that canonicalizes exactly: decoded and encoded
			// again, it is still the same request.
			pruned, err := withoutFields(body, ignore)
			if err != nil {
				return in, fmt.Errorf("leave Config.IgnoreFields out of the body: %w", err)
			}
			body, in.Body = pruned, pruned
			canon, _, err = ops.Canonical(tool, version, in)
			exact = err == nil && !hasEscapedNUL(canon)
		}
		if exact && len(canon) <= maxIntent {
			return in, nil
		}
		in.Body = nil
	}
	sum := sha256.Sum256(body)
	in.ContentType, in.BodySHA256 = ct, hex.EncodeToString(sum[:])
	return in, nil
}

// isJSON tells application/json and the +json types.
func isJSON(mediaType string) bool {
	return mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")
}

// hasEscapedNUL tells whether canonical JSON holds a \u0000 escape, which
// PostgreSQL's jsonb refuses. In canonical JSON a backslash only starts an
// escape, so scanning escapes left to right is exact.
func hasEscapedNUL(canon []byte) bool {
	for i := 0; i < len(canon); i++ {
		if canon[i] != '\\' {
			continue
		}
		if i+5 < len(canon) && string(canon[i+1:i+6]) == "u0000" {
			return true
		}
		i++ // the escaped character
	}
	return false
}
