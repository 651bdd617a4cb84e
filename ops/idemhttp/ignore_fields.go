package idemhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parsePointers parses Config.IgnoreFields into RFC 6901 reference
// tokens, unescaped.
func parsePointers(pointers []string) ([][]string, error) {
	parsed := make([][]string, 0, len(pointers))
	for i, p := range pointers {
		tokens, err := parsePointer(p)
		if err != nil {
			return nil, fmt.Errorf("pointer %d: %w", i, err)
		}
		parsed = append(parsed, tokens)
	}
	return parsed, nil
}

func parsePointer(p string) ([]string, error) {
	switch {
	case p == "":
		return nil, errors.New(`it is empty, which names the whole body; name a member, such as "/meta/sent_at"`)
	case !utf8.ValidString(p):
		return nil, errors.New("it is not valid UTF-8")
	case p[0] != '/':
		return nil, fmt.Errorf("%.64q does not start with \"/\", as a JSON pointer does (RFC 6901)", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		if t == "." || t == ".." {
			return nil, fmt.Errorf("%.64q has a %q segment: a JSON pointer has no dot segments, so it would name a member called %q", p, t, t)
		}
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1') {
				return nil, fmt.Errorf("%.64q has a \"~\" that is not ~0 (for ~) or ~1 (for /)", p)
			}
			j++
			b.WriteByte("~/"[t[j]-'0'])
		}
		tokens[i] = b.String()
	}
	return tokens, nil
}

// withoutFields returns the JSON body without the values the pointers
// name, re-encoded. body must be JSON the library canonicalizes exactly
// (no duplicate member names, lone surrogates or large numbers): decoding
// it into maps and json.Number then loses nothing its canonical form
// holds.
func withoutFields(body []byte, pointers [][]string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode the body: %w", err)
	}
	for _, tokens := range pointers {
		v = remove(v, tokens)
	}
	return json.Marshal(v)
}

// remove returns v without the value tokens names, if it names one.
func remove(v any, tokens []string) any {
	if len(tokens) == 0 {
		return v
	}
	t, rest := tokens[0], tokens[1:]
	switch v := v.(type) {
	case map[string]any:
		child, ok := v[t]
		switch {
		case !ok:
		case len(rest) == 0:
			delete(v, t)
		default:
			v[t] = remove(child, rest)
		}
	case []any:
		i, ok := arrayIndex(t, len(v))
		switch {
		case !ok:
		case len(rest) == 0:
			return append(v[:i:i], v[i+1:]...)
		default:
			v[i] = remove(v[i], rest)
		}
	}
	return v
}

// arrayIndex reads an RFC 6901 array index (digits, no leading zero) of an
// element of an array of n.
func arrayIndex(t string, n int) (int, bool) {
	if t == "" || len(t) > 1 && t[0] == '0' || !allDigits(t) {
		return 0, false
	}
	i, err := strconv.Atoi(t)
	return i, err == nil && i < n
}
