package opsmcp

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsdesk/opsdesk/ops"
)

// The _meta names this package reads on a tool call and writes on its
// result.
const (
	// KeyMeta names the operation's idempotency key in a tools/call
	// request's _meta: a JSON string of 1 to ops.MaxKeyBytes bytes,
	// without control characters, not only white space. The orchestrator
	// derives it from durable run and step state ("run-42/step-3"), so
	// that a retry of the same step sends the same key. A result's _meta
	// carries the key its call ran under under the same name.
	KeyMeta = "io.opsdesk/idempotency-key"
	// SEPKeyMeta is the idempotencyKey of MCP's SEP-3182. The SDK (v1.8.0)
	// has no field for it, so it is read from _meta under this name; a
	// request that sends both names must send the same key.
	SEPKeyMeta = "idempotencyKey"
	// ReplayedMeta is true in a result's _meta when the result is an
	// earlier call's, replayed (nothing ran), and false when the tool ran
	// in this call.
	ReplayedMeta = "io.opsdesk/replayed"
	// OperationMeta holds the record's id and attempt number in a result's
	// _meta, for operators (opsdesk ops show).
	OperationMeta = "io.opsdesk/operation"
)

// keyOf reads the call's key from its _meta. A call without one gets a
// key of its own when optional is set (its retries are then new calls).
func keyOf(meta mcp.Meta, optional bool) (key string, refusal *ToolError) {
	var found []string
	for _, name := range []string{KeyMeta, SEPKeyMeta} {
		v, ok := meta[name]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return "", keyInvalid(fmt.Sprintf("_meta %q must be a JSON string, got %s", name, jsonKind(v)))
		}
		if problem := keyProblem(s); problem != "" {
			return "", keyInvalid(fmt.Sprintf("_meta %q %s", name, problem))
		}
		found = append(found, s)
	}
	switch {
	case len(found) == 2 && found[0] != found[1]:
		return "", keyInvalid(fmt.Sprintf("_meta %q and %q name different keys: send one, or the same in both", KeyMeta, SEPKeyMeta))
	case len(found) > 0:
		return found[0], nil
	case optional:
		var b [16]byte
		_, _ = rand.Read(b[:])
		return "unkeyed-" + hex.EncodeToString(b[:]), nil
	}
	return "", &ToolError{Class: ClassKeyMissing, Message: fmt.Sprintf(
		"this tool changes things and runs only under an idempotency key: send one in the request's _meta as %q, "+
			"derived from the run and step (the same for every retry of this step), not from the arguments", KeyMeta)}
}

// keyProblem says what is wrong with a key, or "". The length is checked
// first, so a huge key costs nothing more.
func keyProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > ops.MaxKeyBytes:
		return fmt.Sprintf("is %d bytes, the limit is %d", len(s), ops.MaxKeyBytes)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.TrimSpace(s) == "":
		return "is only white space"
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("contains control character %U at byte %d", r, i)
		}
	}
	return ""
}

func keyInvalid(message string) *ToolError {
	return &ToolError{Class: ClassKeyInvalid, Message: message + "; nothing ran"}
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, int, int64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
