package idemhttp

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyReasonBytes bounds the reason a Config.ValidateKey error gives
// in a key-invalid answer: its text is cut there, so a hook that quotes
// what it was sent cannot make the answer large.
const MaxKeyReasonBytes = 200

// errKeyRefused wraps what Config.MinKeyLength and Config.ValidateKey
// refuse, as ErrKeyInvalid.
var errKeyRefused = fmt.Errorf("%w: this endpoint does not accept the key", ErrKeyInvalid)

// checkKey applies the service's key format to a key ParseKey accepted.
func (m *Middleware) checkKey(key string) error {
	if len(key) < m.opts.MinKeyLength {
		return fmt.Errorf("%w: it is %d bytes, and keys here are at least %d", errKeyRefused, len(key), m.opts.MinKeyLength)
	}
	if m.opts.ValidateKey == nil {
		return nil
	}
	if err := m.opts.ValidateKey(key); err != nil {
		return fmt.Errorf("%w: %s", errKeyRefused, keyReason(err))
	}
	return nil
}

// keyReason is err's text fit for the client: at most MaxKeyReasonBytes of
// valid UTF-8 without control characters.
func keyReason(err error) string {
	s := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if s == "" {
		return "its format is refused"
	}
	var b strings.Builder
	for _, c := range s {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			c = ' '
		}
		if b.Len()+utf8.RuneLen(c) > MaxKeyReasonBytes {
			b.WriteString("…")
			break
		}
		b.WriteRune(c)
	}
	return b.String()
}

// ErrNotUUID is what UUIDKey refuses a key with.
var ErrNotUUID = errors.New(`keys here are UUIDs, such as "8e03978e-40d5-43e8-bc93-6894a57f9324"`)

// UUIDKey is a Config.ValidateKey that accepts only UUIDs in their
// textual form (RFC 9562): 36 characters, hex digits in groups of 8, 4, 4,
// 4 and 12 separated by hyphens, either case. It does not check the
// version: any UUID a client generates is accepted.
func UUIDKey(key string) error {
	if len(key) != 36 {
		return ErrNotUUID
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return ErrNotUUID
			}
			continue
		}
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return ErrNotUUID
		}
	}
	return nil
}
