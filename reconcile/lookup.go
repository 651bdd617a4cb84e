package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/opsdesk/opsdesk/internal/lookupurl"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
)

// LookupSpec says how to ask a provider whether an effect happened: a GET
// whose status is the answer.
type LookupSpec struct {
	// URL is a template over {tenant}, {tool}, {key} and {provider_key}
	// (opsmodel.Identity.ProviderKey: the key a service that sends it gave the
	// provider), in its path or its query (see internal/lookupurl): each
	// is replaced by its value, percent-encoded so that the URL names this
	// identity and no other.
	URL string
	// Timeout bounds the request (default 5s).
	Timeout time.Duration
	// FoundStatus and NotFoundStatus are the definite answers (default
	// 200 and 404); any other status, a redirect (never followed), or no
	// response is no answer.
	FoundStatus, NotFoundStatus int
	// ResultRef is the JSON pointer (RFC 6901) of the provider's reference
	// in a found answer's body, such as /id: a string, or a number taken
	// as written (see Ask).
	ResultRef string
}

// Answer is a lookup's answer, as evidence for a decision.
type Answer struct {
	// Evidence carries the verdict (LookupNone when the provider gave no
	// definite answer), the SHA-256 of the response body and a summary
	// fit for the audit trail: the host, status, time and verdict, never
	// the body.
	Evidence  Evidence
	ResultRef string
	// Err says why there is no definite answer, or why a found answer
	// gives no ResultRef (Evidence.Lookup tells which): its body is not
	// JSON, names a member twice, or has no reference at the pointer that
	// CheckRef takes.
	Err error
}

// maxLookupBody bounds what is read of a lookup's response.
const maxLookupBody = 1 << 20

// Ask runs the lookup for one identity. It never fails: a provider that
// cannot be asked gives no answer, and says why. A found answer's
// reference is what the provider sent: a string's characters, or a
// number's text as written (never read through a float64); an answer
// that names a member twice anywhere, or whose reference a decision
// could not record as sent (CheckRef), is still found, without a
// reference, and Err says why.
func Ask(ctx context.Context, client *http.Client, spec LookupSpec, tenant, tool, key string) Answer {
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	found, notFound := spec.FoundStatus, spec.NotFoundStatus
	if found == 0 {
		found = http.StatusOK
	}
	if notFound == 0 {
		notFound = http.StatusNotFound
	}
	// A URL that cannot name this identity exactly asks about another one,
	// or none: whatever the provider would answer is not evidence.
	tmpl, err := lookupurl.Parse(spec.URL)
	if err != nil {
		return noAnswer(cannotAsk{fmt.Errorf("lookup URL template: %w", err)})
	}
	id := opsmodel.Identity{Tenant: tenant, Tool: tool, Key: key}
	target, err := tmpl.Build(lookupurl.Values{Tenant: tenant, Tool: tool, Key: key, ProviderKey: id.ProviderKey()})
	if err != nil {
		return noAnswer(cannotAsk{fmt.Errorf("no exact lookup URL for this operation: %w", err)})
	}
	u, err := url.Parse(target)
	if err != nil {
		return noAnswer(cannotAsk{fmt.Errorf("lookup URL: %w", errors.Unwrap(err))})
	}
	host := u.Host

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return noAnswer(cannotAsk{fmt.Errorf("lookup request: %w", err)})
	}
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := noRedirects(client).Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL, which may carry a token
		}
		return noAnswer(fmt.Errorf("no answer from %s: %w", host, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLookupBody))
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		return noAnswer(fmt.Errorf("reading %s's answer: %w", host, err))
	}
	sum := sha256.Sum256(body)
	a := Answer{Evidence: Evidence{Digest: "sha256:" + hex.EncodeToString(sum[:])}}
	tookText := took.String()
	if took < time.Millisecond {
		tookText = "<1ms"
	}
	status := "HTTP " + strconv.Itoa(resp.StatusCode) + " from " + host + " in " + tookText
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// The provider answered for another URL, if at all: following it
		// would take that answer for this operation's.
		a.Err = fmt.Errorf("%s: a redirect, which is no answer for this operation's exact URL (lookups never follow one)", status)
		a.Evidence.Summary = a.Err.Error()
	case resp.StatusCode == found:
		a.Evidence.Lookup = LookupFound
		a.Evidence.Summary = status + ": found"
		if spec.ResultRef != "" {
			ref, err := pointer(body, spec.ResultRef)
			if err != nil {
				// Still found: the status is the answer. Nothing can be
				// confirmed under a reference read from this body.
				a.Err = err
				a.Evidence.Summary += " (no reference: " + err.Error() + ")"
				break
			}
			a.ResultRef, a.Evidence.Ref = ref, ref
			a.Evidence.Summary += ", reference " + ref
		}
	case resp.StatusCode == notFound:
		a.Evidence.Lookup = LookupNotFound
		a.Evidence.Summary = status + ": not found"
	default:
		a.Err = fmt.Errorf("%s: neither found (%d) nor not found (%d)", status, found, notFound)
		a.Evidence.Summary = a.Err.Error()
	}
	return a
}

// ErrCannotAsk matches (errors.Is) an Answer's Err when no request was
// sent: the operation cannot be named to the provider exactly (its
// identity makes no exact lookup URL) or the catalog's URL template is
// wrong. Asking again gives the same answer; any other Err may change.
var ErrCannotAsk = errors.New("the provider cannot be asked about this operation")

// cannotAsk is an error that kept the request from being sent; its text
// is the cause's.
type cannotAsk struct{ err error }

func (e cannotAsk) Error() string        { return e.err.Error() }
func (e cannotAsk) Unwrap() error        { return e.err }
func (e cannotAsk) Is(target error) bool { return target == ErrCannotAsk }

// noRedirects is client without following redirects: a 3xx comes back as
// the answer, which Ask takes for none.
func noRedirects(client *http.Client) *http.Client {
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func noAnswer(err error) Answer {
	return Answer{Err: err, Evidence: Evidence{Summary: err.Error()}}
}

// maxLookupDepth is how deeply a lookup's answer may nest: what
// encoding/json reads, and far more than a provider's answer needs.
const maxLookupDepth = 10_000

// errNotJSON says why a found answer's body gives no reference.
var errNotJSON = errors.New("the body is not JSON")

// pointer reads the reference at the JSON pointer ptr (RFC 6901) in a
// found answer's body: a string's characters, or a number's text exactly
// as the provider wrote it (9007199254740993, 1e21 and -0.0 stay what
// they are, where a float64 makes them 9007199254740992,
// 1000000000000000000000 and -0), if CheckRef takes it.
func pointer(body []byte, ptr string) (string, error) {
	tokens, err := ParsePointer(ptr)
	if err != nil {
		return "", err
	}
	value, found, err := valueAt(body, tokens)
	if err != nil {
		return "", err
	}
	var ref string
	switch v := value.(type) {
	case string:
		if v == "" {
			return "", fmt.Errorf("%s is empty", ptr)
		}
		ref = v
	case json.Number:
		ref = v.String()
	default:
		if !found {
			return "", fmt.Errorf("%s is missing", ptr)
		}
		return "", fmt.Errorf("%s is not a string or a number", ptr)
	}
	if err := CheckRef(ref); err != nil {
		return "", fmt.Errorf("%s: %w", ptr, err)
	}
	return ref, nil
}

// valueAt reads body, one JSON value, and returns the token at the
// pointer tokens: a string, a json.Number (the number's text), a bool,
// nil for null, or the json.Delim that opens an object or an array. A
// body that names a member twice in one object, on the pointer's path or
// anywhere else (escapes decoded: "r\u0065f" is "ref"), is an error:
// decoders take the first or the last, so which one the provider meant is
// unknown. The body is read as a stream that keeps only the member names
// of the objects open around the next token; an error quotes a few bytes
// of it at most.
func valueAt(body []byte, tokens []string) (value any, found bool, err error) {
	if !utf8.Valid(body) {
		// encoding/json would read each bad byte as U+FFFD: not what was sent.
		return nil, false, fmt.Errorf("%w: it is not UTF-8", errNotJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	// container is an object or array open around the next token.
	type container struct {
		names    map[string]struct{} // an object's member names so far; nil for an array
		wantName bool                // an object's next token is a member's name (or its end)
		name     string              // the member whose value is next
		items    int                 // an array's items so far
		onPath   bool                // the container is the value at tokens[:depth]
	}
	var open []container
	ended := false
	for {
		tok, err := dec.Token()
		if err == io.EOF && ended {
			return value, found, nil
		}
		if err != nil || ended {
			return nil, false, errNotJSON // a syntax error, a cut body, or a second value
		}
		depth := len(open)
		if delim, ok := tok.(json.Delim); ok && (delim == '}' || delim == ']') {
			open = open[:depth-1]
			ended = depth == 1
			continue
		}
		if depth > 0 && open[depth-1].wantName {
			parent := &open[depth-1]
			name, ok := tok.(string) // where a name is due, Token returns one or fails
			if !ok {
				return nil, false, errNotJSON
			}
			if _, twice := parent.names[name]; twice {
				return nil, false, fmt.Errorf("the body names member %s twice in one object: "+
					"which one the provider meant is unknown", quoteCut(name))
			}
			parent.names[name] = struct{}{}
			parent.name, parent.wantName = name, false
			continue
		}
		// A value: the one the pointer names, or one on the way to it?
		at := depth == 0
		if depth > 0 {
			parent := &open[depth-1]
			if parent.names != nil {
				at = parent.onPath && parent.name == tokens[depth-1]
				parent.wantName = true
			} else {
				// RFC 6901: an index is decimal, without a sign or leading zeros.
				at = parent.onPath && strconv.Itoa(parent.items) == tokens[depth-1]
				parent.items++
			}
		}
		if at && depth == len(tokens) {
			value, found = tok, true
		}
		delim, ok := tok.(json.Delim)
		if !ok {
			ended = depth == 0
			continue
		}
		if depth == maxLookupDepth {
			return nil, false, fmt.Errorf("the body nests deeper than %d levels", maxLookupDepth)
		}
		c := container{onPath: at && depth < len(tokens)}
		if delim == '{' {
			c.names, c.wantName = map[string]struct{}{}, true
		}
		open = append(open, c)
	}
}

// quoteCut quotes a name from a provider's answer for a message: at most
// its first 40 bytes, and its size when it is longer.
func quoteCut(s string) string {
	const most = 40
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// maxRefBytes is the longest reference a decision records (migration
// 00016).
const maxRefBytes = 500

// CheckRef tells whether ref can be recorded as the provider's reference:
// what retries will replay and people will read. decide takes 500 bytes
// and trims white space; a reference it would change, or that carries
// control or invisible characters, or U+FFFD (which decoders write for
// what they could not read, such as the escape of a lone surrogate), is
// not the provider's as it said it. Ask never gives a ResultRef that
// CheckRef refuses; code that takes answers from elsewhere checks again.
func CheckRef(ref string) error {
	switch {
	case ref == "":
		return errors.New("the answer names no reference (see the tool's lookup result_ref)")
	case len(ref) > maxRefBytes:
		return fmt.Errorf("the reference is %d bytes, over the %d a decision records", len(ref), maxRefBytes)
	case !utf8.ValidString(ref):
		return errors.New("the reference is not UTF-8")
	case strings.TrimFunc(ref, IsSpace) != ref:
		return errors.New("the reference starts or ends with white space")
	case strings.ContainsRune(ref, utf8.RuneError):
		return errors.New("the reference holds U+FFFD, which stands for a character that could not be read")
	}
	for _, c := range ref {
		if !unicode.IsGraphic(c) {
			return fmt.Errorf("the reference holds the control or invisible character %U", c)
		}
	}
	return nil
}

// IsSpace tells whether c is white space as the database's clean_reason
// trims it from references, reasons and notes.
func IsSpace(c rune) bool {
	return unicode.IsSpace(c) || c == '\u180e' || c == '\u200b' || c == '\ufeff'
}
