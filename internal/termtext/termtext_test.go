package termtext

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClean keeps escape sequences in stored text from reaching the
// terminal; line breaks and tabs read as one space.
func TestClean(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain-key":                       "plain-key",
		"key\x1b[2J\x07-42":               "key\uFFFD[2J\uFFFD-42",
		"key\x1b]0;title\x07\u009b2J\x7f": "key\uFFFD]0;title\uFFFD\uFFFD2J\uFFFD",
		"bad \xff utf-8":                  "bad \uFFFD utf-8",
		"a\nb\r\nc\td":                    "a b c d",
		"line\n\t\tindented\r\n":          "line indented ",
		// pgconn's error when every address of the host fails.
		"failed to connect to `user=alice database=opsdesk`:\n\t127.0.0.1:5432 (localhost): dial error: connection refused\n\t[::1]:5432 (localhost): dial error: connection refused": "failed to connect to `user=alice database=opsdesk`: 127.0.0.1:5432 (localhost): dial error: connection refused [::1]:5432 (localhost): dial error: connection refused",
	} {
		got := Clean(in)
		require.Equal(t, want, got, "clean(%q) = %q, want %q", in, got, want)
	}
}

func TestEscapeControls(t *testing.T) {
	t.Parallel()
	in := []byte(`{"k":"a` + "\u009b\x7f\u0080\u009f\u00a0é" + `"}`)
	out := EscapeControls(in)
	require.Equal(t, `{"k":"a\u009b\u007f\u0080\u009f`+"\u00a0é"+`"}`, string(out))
	var a, b map[string]string
	require.NoError(t, json.Unmarshal(in, &a))
	require.NoError(t, json.Unmarshal(out, &b))
	require.Equal(t, a, b, "the same value")
	require.Equal(t, "plain", string(EscapeControls([]byte("plain"))))
	require.Equal(t, "a\nb\uFFFD c \uFFFD", CleanLines("a\nb\x1b c\r\u009b"))
}
