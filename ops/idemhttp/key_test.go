package idemhttp_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/ops/idemhttp"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 255)
	for _, tc := range []struct {
		name   string
		values []string // nil: no header
		want   string
		// problem is a fragment of the error; "" means the key parses.
		problem string
	}{
		{name: "Quoted", values: []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "Unquoted", values: []string{`8e03978e-40d5-43e8-bc93-6894a57f9324`}, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "EscapedQuote", values: []string{`"a\"b"`}, want: `a"b`},
		{name: "EscapedBackslash", values: []string{`"a\\b"`}, want: `a\b`},
		{name: "SpacesInsideQuotes", values: []string{`"a b"`}, want: "a b"},
		{name: "SurroundingWhitespace", values: []string{" \t\"k\" \t"}, want: "k"},
		{name: "DotSegmentsAndPunctuation", values: []string{`../a?b#c&d=e%2F`}, want: "../a?b#c&d=e%2F"},
		{name: "MaxLengthQuoted", values: []string{`"` + long + `"`}, want: long},
		{name: "MaxLengthUnquoted", values: []string{long}, want: long},

		{name: "Missing", values: nil, problem: "missing"},
		{name: "EmptyValue", values: []string{""}, problem: "it is empty"},
		{name: "WhitespaceOnly", values: []string{" \t "}, problem: "it is empty"},
		{name: "EmptyString", values: []string{`""`}, problem: "the key is empty"},
		{name: "OverLongQuoted", values: []string{`"` + long + `k"`}, problem: "256 bytes, the limit is 255"},
		{name: "OverLongUnquoted", values: []string{long + "k"}, problem: "256 bytes, the limit is 255"},
		{name: "OverLongOnceUnescaped", values: []string{`"` + strings.Repeat(`\\`, 256) + `"`}, problem: "256 bytes"},
		{name: "Repeated", values: []string{`"a"`, `"a"`}, problem: "sent 2 times"},
		{name: "List", values: []string{`"a", "b"`}, problem: "it is a list"},
		{name: "UnquotedList", values: []string{`a,b`}, problem: "it is a list"},
		{name: "Parameters", values: []string{`"a";p=1`}, problem: "parameters"},
		{name: "UnquotedParameters", values: []string{`a;p=1`}, problem: "may not contain ';'"},
		{name: "TrailingGarbage", values: []string{`"a"b`}, problem: "after the closing quote"},
		{name: "Unterminated", values: []string{`"abc`}, problem: "closing quote is missing"},
		{name: "BadEscape", values: []string{`"a\nb"`}, problem: "is not an escape"},
		{name: "EscapeAtEnd", values: []string{`"a\`}, problem: "ends inside an escape"},
		{name: "UnquotedSpace", values: []string{`a b`}, problem: "whitespace"},
		{name: "UnquotedQuote", values: []string{`a"b`}, problem: `may not contain '"'`},
		{name: "UnquotedBackslash", values: []string{`a\b`}, problem: `may not contain '\\'`},
		{name: "ControlInQuotes", values: []string{"\"a\x01b\""}, problem: "0x01"},
		{name: "NULInQuotes", values: []string{"\"a\x00b\""}, problem: "0x00"},
		{name: "TabInQuotes", values: []string{"\"a\tb\""}, problem: "0x09"},
		{name: "NewlineUnquoted", values: []string{"a\nb"}, problem: "0x0a"},
		{name: "DEL", values: []string{"\"a\x7fb\""}, problem: "0x7f"},
		{name: "NonASCIIQuoted", values: []string{`"ключ"`}, problem: "0xd0"},
		{name: "NonASCIIUnquoted", values: []string{"ключ-ü"}, problem: "0xd0"},
		{name: "IdeographicSpace", values: []string{"\"a\u3000b\""}, problem: "0xe3"},
		{name: "InvalidUTF8", values: []string{"\"a\xffb\""}, problem: "0xff"},
		{name: "BareInteger", values: []string{"12345"}, problem: `structured-field Integer, not a String; send the key as a quoted string: "12345"`},
		{name: "BareDecimal", values: []string{"-1.5"}, problem: "Decimal"},
		{name: "BareBoolean", values: []string{"?1"}, problem: "Boolean"},
		{name: "BareByteSequence", values: []string{":YWJj:"}, problem: "Byte Sequence"},
		{name: "BareDate", values: []string{"@1700000000"}, problem: "Date"},
		{name: "QuotedInteger", values: []string{`"12345"`}, want: "12345"},
		{name: "BareTooLongForAnInteger", values: []string{"1234567890123456"}, want: "1234567890123456"},
		{name: "BareNotABoolean", values: []string{"?2"}, want: "?2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for _, v := range tc.values {
				h.Add(idemhttp.KeyHeader, v)
			}
			key, err := idemhttp.ParseKey(h)
			if tc.problem == "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, key)
				return
			}
			require.Error(t, err)
			require.Empty(t, key)
			if tc.values == nil {
				require.ErrorIs(t, err, idemhttp.ErrKeyMissing)
			} else {
				require.ErrorIs(t, err, idemhttp.ErrKeyInvalid)
			}
			require.Contains(t, err.Error(), tc.problem)
		})
	}
}

func TestFormatKey(t *testing.T) {
	t.Parallel()
	v, err := idemhttp.FormatKey(`a"b\c d`)
	require.NoError(t, err)
	require.Equal(t, `"a\"b\\c d"`, v)
	for _, bad := range []string{"", strings.Repeat("k", 256), "ключ", "a\x00b", "a\tb"} {
		_, err := idemhttp.FormatKey(bad)
		require.ErrorIs(t, err, idemhttp.ErrKeyInvalid, "%q", bad)
	}
}

// FuzzKeyRoundTrip: whatever FormatKey writes, ParseKey reads back as the
// same key, and whatever ParseKey accepts is printable ASCII of 1 to 255
// bytes.
func FuzzKeyRoundTrip(f *testing.F) {
	for _, s := range []string{"a", `a"b`, `\`, `"x"`, "ключ", "a,b", strings.Repeat("z", 255), "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := idemhttp.FormatKey(s); err == nil {
			got, err := idemhttp.ParseKey(http.Header{idemhttp.KeyHeader: {v}})
			require.NoError(t, err)
			require.Equal(t, s, got)
		}
		key, err := idemhttp.ParseKey(http.Header{idemhttp.KeyHeader: {s}})
		if err != nil {
			return
		}
		require.NotEmpty(t, key)
		require.LessOrEqual(t, len(key), 255)
		for i := 0; i < len(key); i++ {
			require.True(t, key[i] >= 0x20 && key[i] <= 0x7e, "%q", key)
		}
	})
}

// TestBareItemKeys (issue 19 §2): the key is an sf-string. An unquoted
// value that a structured-field parser reads as another kind of item
// (12345, ?1, :YWJj:) is refused; unquoted tokens and other bare keys are
// accepted as before.
func TestBareItemKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, v := range []string{"12345", "-7", "0012", "1.5", "-123456789012.123", "?1", "?0", ":YWJj:", "::", "@1700000000"} {
		p := problem(t, b.do(t, call{key: key(v)}), http.StatusBadRequest, idemhttp.TypeKeyInvalid, false)
		require.Contains(t, p.Detail, `"`+v+`"`, "the detail shows the quoted form")
	}
	require.Zero(t, b.calls.Load())
	for i, v := range []string{`"12345"`, `"?1"`, `":YWJj:"`, "abc", "8e03978e-40d5-43e8-bc93-6894a57f9324", "1e5", "1234567890123456", "?2", ":a:b", "@x", "1.2345"} {
		require.Equal(t, http.StatusCreated, b.do(t, call{key: key(v)}).status, v)
		require.EqualValues(t, i+1, b.calls.Load(), v)
	}
	// The quoted form names the characters: "12345" is the key 12345.
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM opsdesk.operations WHERE key = '12345'`))

	// A control byte never reaches the middleware: net/http answers 400
	// in plain text, not a problem document.
	conn, err := net.Dial("tcp", b.srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-acme\r\nIdempotency-Key: \"a\x01b\"\r\nContent-Length: 0\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
}
