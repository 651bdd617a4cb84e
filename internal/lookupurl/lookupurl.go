// Package lookupurl builds a provider lookup's URL from its template over
// {tenant}, {tool}, {key} and {provider_key} so that every identity is
// represented exactly: two identities never share a URL, and no value can change the
// URL's shape. A provider's answer is evidence about one operation only if
// the request named that operation and no other; an HTTP stack that
// normalises dot segments, splits on an unescaped & or strips a ;param
// would otherwise answer for a different identity, and a "not found" for
// the wrong URL reads as a definite "the effect did not happen".
//
// The package is shared by the configuration's validation (config) and
// the lookup itself (reconcile), so both agree on what a template may be.
package lookupurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// MaxLen bounds a built URL. Servers and proxies commonly refuse longer
// request lines (or, worse, cut them); a URL that cannot be sent whole
// is no question at all.
const MaxLen = 8 << 10

// placeholders are the names a template may use.
var placeholders = []string{"tenant", "tool", "key", "provider_key"}

// placeholderList names them in messages.
const placeholderList = "{tenant}, {tool}, {key} and {provider_key}"

// Template is a parsed lookup URL template.
type Template struct {
	// prefix is scheme://authority, verbatim: no placeholder may sit in it.
	prefix string
	// segments is the path split on "/" (the first is empty: the path
	// starts with "/"), each with its placeholders.
	segments []string
	// query is the raw query without "?"; hasQuery keeps a bare "?".
	query    string
	hasQuery bool
	// fragment is never sent; kept so the built URL parses as the
	// template did.
	fragment string
	// providerKey tells whether the template uses {provider_key}.
	providerKey bool
}

// Parse checks a template: an absolute http or https URL with {key} or
// {provider_key} somewhere in its path or query (either names the
// operation to the provider), placeholders only in the path and the query
// (never in the scheme, the host or the fragment), and no other {name}.
func Parse(tmpl string) (*Template, error) {
	if tmpl == "" {
		return nil, errors.New("the URL is empty")
	}
	if err := checkNames(tmpl); err != nil {
		return nil, err
	}
	scheme, rest, ok := strings.Cut(tmpl, "://")
	if !ok {
		return nil, errors.New("not an absolute http or https URL (write it like https://provider.example/lookup/{key})")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, rest := rest[:end], rest[end:]
	if hasPlaceholder(scheme) || hasPlaceholder(authority) {
		return nil, errors.New("a placeholder in the scheme or the host: only the path and the query may carry " + placeholderList)
	}
	t := &Template{prefix: scheme + "://" + authority}
	rest, t.fragment, _ = strings.Cut(rest, "#")
	if hasPlaceholder(t.fragment) {
		return nil, errors.New("a placeholder in the fragment (after #), which is never sent to the provider")
	}
	var path string
	path, t.query, t.hasQuery = strings.Cut(rest, "?")
	if path != "" {
		t.segments = strings.Split(path, "/")
	}
	t.providerKey = strings.Contains(path+"?"+t.query, "{provider_key}")
	if !strings.Contains(path+"?"+t.query, "{key}") && !t.providerKey {
		return nil, errors.New("no {key} or {provider_key} in the path or the query: every operation would get the same answer")
	}
	// The template with neutral values must be a URL of the kind we send.
	u, err := url.Parse(strings.NewReplacer("{tenant}", "t", "{tool}", "t", "{key}", "k", "{provider_key}", "k").Replace(tmpl))
	switch {
	case err != nil:
		return nil, fmt.Errorf("not a URL: %w", errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q: not an http or https URL", u.Scheme)
	case u.Host == "":
		return nil, errors.New("no host")
	}
	return t, nil
}

// checkNames refuses a {name} that is not a placeholder: it would be sent
// as is, and was surely meant to be replaced.
func checkNames(tmpl string) error {
	rest := tmpl
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			return nil
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return errors.New("a { without its }: placeholders are " + placeholderList)
		}
		name := rest[open+1 : open+end]
		if !isPlaceholder(name) {
			return fmt.Errorf("unknown placeholder {%s}: placeholders are %s", name, placeholderList)
		}
		rest = rest[open+end+1:]
	}
}

func isPlaceholder(name string) bool {
	for _, p := range placeholders {
		if name == p {
			return true
		}
	}
	return false
}

func hasPlaceholder(s string) bool { return strings.Contains(s, "{") }

// Values are an identity's parts, by placeholder.
type Values struct {
	Tenant, Tool, Key string
	// ProviderKey is the key the provider knows the operation by when the
	// service sends it ops.Identity.ProviderKey: the caller derives it
	// (this package does not know how).
	ProviderKey string
}

func (v Values) get(name string) string {
	switch name {
	case "tenant":
		return v.Tenant
	case "tool":
		return v.Tool
	case "provider_key":
		return v.ProviderKey
	}
	return v.Key
}

// Build is the URL for one identity. Every value is percent-encoded
// except the unreserved characters (letters, digits, - . _ ~), in the
// path as in the query: / ? # & = ; + % and spaces cannot change the URL's
// shape, and no server's reading (form decoding, path parameters) can
// merge two identities. A path segment that would be . or .. is written
// %2E or %2E%2E, so that no HTTP stack removes it as a dot segment. A
// value that leaves a path segment empty, an empty ProviderKey for a
// template with {provider_key}, and a URL over MaxLen, are refused: the
// URL could not name the identity exactly.
func (t *Template) Build(v Values) (string, error) {
	if t.providerKey && v.ProviderKey == "" {
		// Never empty when derived: a lookup for "" would ask about no
		// operation, and its "not found" would read as an answer.
		return "", errors.New("the provider_key is empty: the lookup needs the key the provider knows the operation by")
	}
	for _, name := range placeholders {
		if n := len(v.get(name)); n > MaxLen {
			return "", fmt.Errorf("the %s is %d bytes: a lookup URL carries at most %d", name, n, MaxLen)
		}
	}
	var b strings.Builder
	b.WriteString(t.prefix)
	for i, seg := range t.segments {
		if i > 0 {
			b.WriteByte('/')
		}
		out, used := expand(seg, v)
		if used != "" {
			switch out {
			case "":
				return "", fmt.Errorf("the %s is empty: an empty path segment names no identity", used)
			case ".", "..":
				out = strings.Repeat("%2E", len(out))
			}
		}
		b.WriteString(out)
	}
	if t.hasQuery {
		b.WriteByte('?')
		out, _ := expand(t.query, v)
		b.WriteString(out)
	}
	if t.fragment != "" {
		b.WriteString("#" + t.fragment)
	}
	if b.Len() > MaxLen {
		return "", fmt.Errorf("the lookup URL would be %d bytes, over the %d a provider is sure to take", b.Len(), MaxLen)
	}
	return b.String(), nil
}

// expand replaces the placeholders in s with their escaped values; used
// names the last placeholder expanded, if any.
func expand(s string, v Values) (out, used string) {
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '{')
		if open < 0 {
			b.WriteString(s)
			return b.String(), used
		}
		end := strings.IndexByte(s[open:], '}') // Parse checked it is there
		name := s[open+1 : open+end]
		b.WriteString(s[:open])
		b.WriteString(Escape(v.get(name)))
		used = name
		s = s[open+end+1:]
	}
}

// Escape percent-encodes every byte of s but the unreserved characters of
// RFC 3986 (ALPHA, DIGIT, - . _ ~), which mean the same escaped or not.
func Escape(s string) string {
	const hex = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
