package reconcile

import (
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
	"github.com/opsdesk/opsdesk/ops"
)

// LookupSpec says how to ask a provider whether an effect happened: a GET
// whose status is the answer.
type LookupSpec struct {
	// URL is a template over {tenant}, {tool}, {key} and {provider_key}
	// (ops.Identity.ProviderKey: the key a service that sends it gave the
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
	// in a found answer's body, such as /id.
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
	// Err says why there is no definite answer.
	Err error
}

// maxLookupBody bounds what is read of a lookup's response.
const maxLookupBody = 1 << 20

// Ask runs the lookup for one identity. It never fails: a provider that
// cannot be asked gives no answer, and says why.
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
	id := ops.Identity{Tenant: tenant, Tool: tool, Key: key}
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

// pointer reads the string (or number) at a JSON pointer in body.
func pointer(body []byte, ptr string) (string, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "", errors.New("the body is not JSON")
	}
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[tok]
			if !ok {
				return "", fmt.Errorf("%s is missing", ptr)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(node) {
				return "", fmt.Errorf("%s is missing", ptr)
			}
			v = node[i]
		default:
			return "", fmt.Errorf("%s is missing", ptr)
		}
	}
	switch ref := v.(type) {
	case string:
		if ref == "" {
			return "", fmt.Errorf("%s is empty", ptr)
		}
		return ref, nil
	case float64:
		return strconv.FormatFloat(ref, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("%s is not a string", ptr)
}

// MaxRefBytes is the longest reference a decision records (migration
// 00016).
const MaxRefBytes = 500

// CheckRef tells whether ref can be recorded as the provider's reference:
// what retries will replay and people will read. decide takes 500 bytes
// and trims white space; a reference it would change, or that carries
// control or invisible characters, is not the provider's as it said it.
func CheckRef(ref string) error {
	switch {
	case ref == "":
		return errors.New("the answer names no reference (see the tool's lookup result_ref)")
	case len(ref) > MaxRefBytes:
		return fmt.Errorf("the reference is %d bytes, over the %d a decision records", len(ref), MaxRefBytes)
	case !utf8.ValidString(ref):
		return errors.New("the reference is not UTF-8")
	case strings.TrimFunc(ref, IsSpace) != ref:
		return errors.New("the reference starts or ends with white space")
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
