package idemhttp

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/opsdesk/opsdesk/ops"
)

// KeyHeader is the request header that carries the idempotency key.
const KeyHeader = "Idempotency-Key"

// Errors of ParseKey. Both are answered 400 by the middleware.
var (
	// ErrKeyMissing: the request has no Idempotency-Key header.
	ErrKeyMissing = errors.New("the Idempotency-Key header is missing")
	// ErrKeyInvalid: the header is there but holds no usable key. The
	// error's text says what is wrong.
	ErrKeyInvalid = errors.New("the Idempotency-Key header is invalid")
)

// ParseKey reads the idempotency key of a request's header.
//
// The draft defines the field as a Structured Field Item whose value is a
// String (RFC 8941): a quoted string of printable ASCII in which only \" and
// \\ are escapes, such as "8e03978e-40d5-43e8-bc93-6894a57f9324". The
// common unquoted form (the key's characters alone, as Stripe's clients
// send it) is accepted too when it cannot be read as another kind of item:
// visible ASCII without a quote, backslash, comma or semicolon, that is
// not a whole Integer or Decimal (12345, -1.5), Boolean (?1), Byte
// Sequence (:YWJj:) or Date (@1700000000). A structured-field parser on
// the way (a proxy, a client library) reads those as numbers, booleans or
// bytes, not as the characters sent: 012 and 12 are one Integer. Send
// such a key quoted ("12345").
//
// Refused, with ErrKeyInvalid: the field sent more than once or as a list,
// an empty key, a key over ops.MaxKeyBytes (255) bytes, a character that is
// not printable ASCII (control characters, bytes of UTF-8), a bad escape, a
// missing closing quote, and parameters after the string (the draft defines
// none).
func ParseKey(h http.Header) (string, error) {
	values := h.Values(KeyHeader)
	switch len(values) {
	case 0:
		return "", ErrKeyMissing
	case 1:
	default:
		return "", fmt.Errorf("%w: it was sent %d times; send it once", ErrKeyInvalid, len(values))
	}
	// HTTP trims the optional whitespace around a field value; a header
	// built by hand may still carry it.
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return "", fmt.Errorf("%w: it is empty", ErrKeyInvalid)
	}
	var key string
	if v[0] == '"' {
		k, rest, err := parseString(v)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrKeyInvalid, err)
		}
		switch rest = strings.TrimLeft(rest, " \t"); {
		case rest == "":
		case rest[0] == ',':
			return "", fmt.Errorf("%w: it is a list; send exactly one key", ErrKeyInvalid)
		case rest[0] == ';':
			return "", fmt.Errorf("%w: parameters after the key are not accepted", ErrKeyInvalid)
		default:
			return "", fmt.Errorf("%w: unexpected characters after the closing quote", ErrKeyInvalid)
		}
		key = k
	} else {
		if err := checkBare(v); err != nil {
			return "", fmt.Errorf("%w: %w", ErrKeyInvalid, err)
		}
		key = v
	}
	switch {
	case key == "":
		return "", fmt.Errorf("%w: the key is empty", ErrKeyInvalid)
	case len(key) > ops.MaxKeyBytes:
		return "", fmt.Errorf("%w: the key is %d bytes, the limit is %d", ErrKeyInvalid, len(key), ops.MaxKeyBytes)
	}
	return key, nil
}

// parseString parses the sf-string at the start of v (RFC 8941 section
// 4.2.5) and returns it unescaped with what follows it.
func parseString(v string) (s, rest string, err error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			return b.String(), v[i+1:], nil
		case c == '\\':
			if i+1 == len(v) {
				return "", "", errors.New("it ends inside an escape")
			}
			i++
			if v[i] != '"' && v[i] != '\\' {
				return "", "", fmt.Errorf(`%q at byte %d is not an escape: inside quotes a backslash escapes only \" and \\`, v[i-1:i+1], i-1)
			}
			b.WriteByte(v[i])
		case c < 0x20 || c > 0x7e:
			return "", "", notPrintable(c, i)
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("the closing quote is missing")
}

// checkBare checks the unquoted form: visible ASCII, without the characters
// that would make it a string, a list or a parameterized item.
func checkBare(v string) error {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == ',':
			return errors.New("it is a list; send exactly one key")
		case c == ' ' || c == '\t':
			return errors.New("it contains whitespace; send the key as a quoted string")
		case c == '"' || c == '\\' || c == ';':
			return fmt.Errorf("unquoted, it may not contain %q; send the key as a quoted string", c)
		case c < 0x20 || c > 0x7e:
			return notPrintable(c, i)
		}
	}
	if kind := bareItemKind(v); kind != "" {
		return fmt.Errorf("unquoted, %s is a structured-field %s, not a String; send the key as a quoted string: %q", v, kind, v)
	}
	return nil
}

// bareItemKind names the RFC 8941 (and RFC 9651 Date) item that the
// whole of v is, other than a Token, or returns "".
func bareItemKind(v string) string {
	switch {
	case v == "?0" || v == "?1":
		return "Boolean"
	case v[0] == '@' && isNumber(v[1:], false):
		return "Date"
	case isNumber(v, false):
		return "Integer"
	case isNumber(v, true):
		return "Decimal"
	case len(v) >= 2 && v[0] == ':' && v[len(v)-1] == ':' && isBase64(v[1:len(v)-1]):
		return "Byte Sequence"
	}
	return ""
}

// isNumber tells whether v is an sf-integer (at most 15 digits, an
// optional minus sign) or, with decimal, an sf-decimal (at most 12
// digits, a dot, 1 to 3 digits).
func isNumber(v string, decimal bool) bool {
	v = strings.TrimPrefix(v, "-")
	whole, frac, dot := strings.Cut(v, ".")
	if dot != decimal || !allDigits(whole) {
		return false
	}
	if !decimal {
		return len(whole) <= 15
	}
	return len(whole) <= 12 && allDigits(frac) && len(frac) <= 3
}

func allDigits(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return v != ""
}

// isBase64 tells whether v holds only base64 characters (RFC 8941 byte
// sequences; padding included).
func isBase64(v string) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/', c == '=':
		default:
			return false
		}
	}
	return true
}

func notPrintable(c byte, at int) error {
	return fmt.Errorf("byte 0x%02x at %d is not printable ASCII; a key holds only characters from space to ~", c, at)
}

// FormatKey writes key as the draft's field value, a quoted sf-string, for
// clients that send the header. It refuses what ParseKey would refuse.
func FormatKey(key string) (string, error) {
	switch {
	case key == "":
		return "", fmt.Errorf("%w: the key is empty", ErrKeyInvalid)
	case len(key) > ops.MaxKeyBytes:
		return "", fmt.Errorf("%w: the key is %d bytes, the limit is %d", ErrKeyInvalid, len(key), ops.MaxKeyBytes)
	}
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: %w", ErrKeyInvalid, notPrintable(c, i))
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}
