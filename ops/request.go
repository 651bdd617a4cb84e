package ops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"
)

// MaxKeyBytes is the longest key accepted, in bytes.
const MaxKeyBytes = 255

// maxNameBytes bounds tenant, tool and version names.
const maxNameBytes = 128

// Request is one mutating call.
type Request struct {
	Identity
	// Version is the tool's version. It is part of the fingerprint: a new
	// version whose canonical intent differs is a conflict, not a replay.
	Version string
	// Intent is the validated request, marshalled with encoding/json and
	// canonicalized (RFC 8785). Use DecodeIntent to build it from raw
	// arguments. A json.RawMessage is canonicalized as it is.
	Intent any
}

// Validator is implemented by intents that check themselves. DecodeIntent
// calls it.
type Validator interface {
	Validate() error
}

// DecodeIntent decodes raw JSON arguments into a typed intent. Unknown
// fields, trailing data and a failed Validate are *InvalidRequestError.
func DecodeIntent[T any](raw []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, &InvalidRequestError{Field: "intent", Problem: describeJSONError(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, &InvalidRequestError{Field: "intent", Problem: "unexpected data after the JSON value"}
	}
	if val, ok := any(&v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return v, &InvalidRequestError{Field: "intent", Problem: err.Error(), Err: err}
		}
	} else if val, ok := any(v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return v, &InvalidRequestError{Field: "intent", Problem: err.Error(), Err: err}
		}
	}
	return v, nil
}

func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Sprintf("field %q: expected %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)
	}
	if errors.Is(err, io.EOF) {
		return "empty JSON"
	}
	// encoding/json says `json: unknown field "x"`; drop the package name.
	return trimPrefix(err.Error(), "json: ")
}

func trimPrefix(s, prefix string) string {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}

// validate checks the identity and version; the intent is checked when it is
// canonicalized.
func (r *Request) validate() error {
	if err := checkName("tenant", r.Tenant, maxNameBytes); err != nil {
		return err
	}
	if err := checkName("tool", r.Tool, maxNameBytes); err != nil {
		return err
	}
	if err := checkName("version", r.Version, maxNameBytes); err != nil {
		return err
	}
	return checkName("key", r.Key, MaxKeyBytes)
}

func checkName(field, v string, maxBytes int) error {
	switch {
	case v == "":
		return &InvalidRequestError{Field: field, Problem: "must not be empty"}
	case len(v) > maxBytes:
		return &InvalidRequestError{Field: field, Problem: fmt.Sprintf("is %d bytes, the limit is %d", len(v), maxBytes)}
	case !utf8.ValidString(v):
		return &InvalidRequestError{Field: field, Problem: "is not valid UTF-8"}
	}
	for i, r := range v {
		if unicode.IsControl(r) {
			return &InvalidRequestError{Field: field, Problem: fmt.Sprintf("contains control character %U at byte %d", r, i)}
		}
	}
	return nil
}
