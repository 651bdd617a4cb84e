package reconcile_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/lookuptest"
	"github.com/opsdesk/opsdesk/reconcile"
)

// TestLookupReferenceIsTheProvidersText: a found answer's reference is
// what the provider sent: a number's text byte for byte (never read
// through float64), a string's characters. An answer naming a member
// twice, anywhere, or whose reference a decision cannot record as it was
// sent, is found without a reference, and the summary says what was wrong
// in a line, without quoting the answer.
func TestLookupReferenceIsTheProvidersText(t *testing.T) {
	t.Parallel()
	spec := reconcile.LookupSpec{URL: lookuptest.Serve(t), ResultRef: lookuptest.Pointer, Timeout: 5 * time.Second}
	for _, want := range lookuptest.Answers {
		t.Run(want.Key, func(t *testing.T) {
			t.Parallel()
			a := reconcile.Ask(t.Context(), http.DefaultClient, spec, "acme", "charge-card", want.Key)
			require.Equal(t, reconcile.LookupFound, a.Evidence.Lookup, "the status is the answer: %s", a.Evidence.Summary)
			require.Equal(t, want.Ref, a.ResultRef)
			require.Equal(t, want.Ref, a.Evidence.Ref, "the database checks decisions against this one")
			require.Less(t, len(a.Evidence.Summary), 300, "never the answer itself")
			for _, c := range a.Evidence.Summary {
				require.True(t, unicode.IsGraphic(c), "summary %q", a.Evidence.Summary)
			}
			if want.Ref != "" {
				require.NoError(t, a.Err)
				require.Regexp(t, `: found, reference `+regexp.QuoteMeta(want.Ref)+`$`, a.Evidence.Summary)
				return
			}
			require.ErrorContains(t, a.Err, want.Says)
			require.Contains(t, a.Evidence.Summary, ": found (no reference: "+a.Err.Error()+")")
		})
	}
}

// TestLookupPointerTokens: the pointer's tokens are read as RFC 6901
// says: ~1 and ~0 are / and ~, an array index is a decimal number
// without a sign or leading zeros, and "-" names no item.
func TestLookupPointerTokens(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"a/b": {"m~n": "CH-slash-tilde"}, "items": ["CH-0", "CH-1"], "": {"": "CH-empty"}}`))
	}))
	defer srv.Close()
	for ptr, want := range map[string]string{
		"/a~1b/m~0n": "CH-slash-tilde", "/items/0": "CH-0", "/items/1": "CH-1", "//": "CH-empty",
		"/items/01": "", "/items/+1": "", "/items/-": "", "/items/2": "", "/a~1b/m~n": "", "/a/b": "",
	} {
		spec := reconcile.LookupSpec{URL: srv.URL + "/{key}", ResultRef: ptr}
		a := reconcile.Ask(t.Context(), srv.Client(), spec, "acme", "charge-card", "k")
		require.Equal(t, reconcile.LookupFound, a.Evidence.Lookup, ptr)
		require.Equal(t, want, a.ResultRef, ptr)
		if want == "" {
			require.ErrorContains(t, a.Err, ptr, "says which pointer names nothing")
		}
	}
}
