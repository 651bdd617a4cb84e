package readmodel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Filter narrows a list. Values within one field are alternatives (OR);
// fields combine with AND. The zero Filter matches everything.
type Filter struct {
	States  []State
	Tenants []string
	Tools   []string
	Owners  []string
	// Keys are patterns: '*' matches any run of characters; without '*'
	// the key must match exactly.
	Keys []string
	IDs  []int64
	// Conflicted keeps records with unreviewed conflicts.
	Conflicted bool
	// MinAge and MaxAge bound the lease age (time since the current
	// attempt took its lease); zero means unbounded.
	MinAge, MaxAge time.Duration
	// ExpiresWithin keeps records whose retention ends within this long
	// from now; ExpiresAfter those whose retention ends later than this.
	ExpiresWithin, ExpiresAfter time.Duration
}

// FilterHelp describes the filter language, for help screens and flags.
const FilterHelp = `state:stuck|deferred|pending|completed|rejected|released|conflicted  tenant:T  tool:T  owner:O
key:run-42*  id:48213  age>10m  age<1h  expires<24h   (a,b: either; terms combine with AND; "quote values with spaces")`

// ParseFilter reads the filter language, for example
//
//	state:stuck tool:create-ticket tenant:acme key:run-42* owner:worker-3 age>10m
//
// Errors say which term is wrong and how to write it.
func ParseFilter(s string) (Filter, error) {
	var f Filter
	err := eachTerm(s, "write field:value (fields: state, tenant, tool, owner, key, id), age>10m / age<1h or expires<24h / expires>7d",
		func(t term) error {
			if t.field == "age" || t.field == "expires" {
				d, err := t.duration()
				switch {
				case err != nil:
					return err
				case t.field == "age" && t.op == ">":
					f.MinAge = d
				case t.field == "age":
					f.MaxAge = d
				case t.op == "<":
					f.ExpiresWithin = d
				default:
					f.ExpiresAfter = d
				}
				return nil
			}
			values, err := t.values()
			if err != nil {
				return err
			}
			switch t.field {
			case "state":
				for _, v := range values {
					if v == "conflicted" {
						f.Conflicted = true
						continue
					}
					if !slices.Contains(States, State(v)) {
						return fmt.Errorf("%q: unknown state %q (states: pending, stuck, deferred, completed, rejected, released, conflicted)", t.text, v)
					}
					f.States = append(f.States, State(v))
				}
			case "tenant":
				f.Tenants = values
			case "tool":
				f.Tools = values
			case "owner":
				f.Owners = values
			case "key":
				f.Keys = values
			case "id":
				f.IDs, err = t.ids(values, "a record number")
				return err
			default:
				return fmt.Errorf("%q: unknown field %q (fields: state, tenant, tool, owner, key, id, age, expires)", t.text, t.field)
			}
			return nil
		})
	if err != nil {
		return f, err
	}
	if f.MinAge > 0 && f.MaxAge > 0 && f.MinAge >= f.MaxAge {
		return f, fmt.Errorf("age>%v and age<%v match nothing", f.MinAge, f.MaxAge)
	}
	if f.ExpiresWithin > 0 && f.ExpiresAfter > 0 && f.ExpiresAfter >= f.ExpiresWithin {
		return f, fmt.Errorf("expires>%v and expires<%v match nothing", f.ExpiresAfter, f.ExpiresWithin)
	}
	return f, nil
}

// term is one term of a filter: field:value, or field>value and
// field<value for durations. text is the term as written, for errors.
type term struct{ text, field, op, value string }

// MaxFilterBytes bounds a filter's text, in every filter language: far
// above what a person types (names are at most 128 bytes), and low enough
// that a pasted or scripted value is refused before it is parsed, sent to
// the database or echoed back in a message.
const MaxFilterBytes = 8 << 10

// eachTerm splits a filter into terms and calls fn with each. It refuses a
// filter over MaxFilterBytes, a term that is not field:value (usage says
// how to write one), a field given twice with the same operator, and an
// empty value, the same way for every filter language.
func eachTerm(s, usage string, fn func(term) error) error {
	if len(s) > MaxFilterBytes {
		return fmt.Errorf("the filter is %d bytes: write at most %d", len(s), MaxFilterBytes)
	}
	terms, err := splitTerms(s)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, text := range terms {
		field, op, value, ok := cutTerm(text)
		if !ok {
			return fmt.Errorf("%q: %s", text, usage)
		}
		if seen[field+op] {
			return fmt.Errorf("%q: %s is given twice; list alternatives as %s%sa,b", text, field, field, op)
		}
		seen[field+op] = true
		if value == "" {
			return fmt.Errorf("%q: %s needs a value", text, field)
		}
		if err := fn(term{text: text, field: field, op: op, value: value}); err != nil {
			return err
		}
	}
	return nil
}

// parseDuration reads Go durations and whole days ("7d"), which retention
// needs.
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n > 10_000 {
			return 0, fmt.Errorf("bad day count %q", days)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// cutTerm splits field:value, age>d and age<d.
func cutTerm(term string) (field, op, value string, ok bool) {
	if i := strings.IndexAny(term, ":<>"); i > 0 {
		return strings.ToLower(term[:i]), term[i : i+1], term[i+1:], isAgeOp(term[:i], term[i])
	}
	return "", "", "", false
}

// isAgeOp accepts < and > only after age and expires, and : everywhere
// else.
func isAgeOp(field string, op byte) bool {
	if strings.EqualFold(field, "age") || strings.EqualFold(field, "expires") {
		return op == '<' || op == '>'
	}
	return op == ':'
}

// splitTerms splits on spaces outside double quotes and removes the quotes.
func splitTerms(s string) ([]string, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("the filter is not valid UTF-8")
	}
	var (
		terms   []string
		cur     strings.Builder
		quoted  bool
		started bool
	)
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			started = true
		case unicode.IsSpace(r) && !quoted:
			if started {
				terms = append(terms, cur.String())
				cur.Reset()
				started = false
			}
		case unicode.IsControl(r):
			return nil, fmt.Errorf("the filter contains a control character")
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if started {
		terms = append(terms, cur.String())
	}
	return terms, nil
}

// values are a term's alternatives (a,b), none of them empty.
func (t term) values() ([]string, error) {
	values := strings.Split(t.value, ",")
	for _, v := range values {
		if v == "" {
			return nil, fmt.Errorf("%q: empty alternative in %q", t.text, t.value)
		}
	}
	return values, nil
}

// duration is a term's positive duration.
func (t term) duration() (time.Duration, error) {
	d, err := parseDuration(t.value)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: %s needs a positive duration such as 90s, 10m, 2h or 7d", t.text, t.field)
	}
	return d, nil
}

// ids reads record numbers; what says what the number is, for the error.
func (t term) ids(values []string, what string) ([]int64, error) {
	out := make([]int64, 0, len(values))
	for _, v := range values {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%q: id needs %s such as 48213", t.text, what)
		}
		out = append(out, id)
	}
	return out, nil
}

// durationText writes a duration as the filter language takes it, without
// Go's trailing zero units: 24h, not 24h0m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// String writes the filter back in the language (canonical order).
func (f Filter) String() string {
	var terms []string
	states := make([]string, 0, len(f.States)+1)
	for _, s := range f.States {
		states = append(states, string(s))
	}
	if f.Conflicted {
		states = append(states, "conflicted")
	}
	add := func(field string, values []string) {
		if len(values) == 0 {
			return
		}
		v := strings.Join(values, ",")
		if strings.ContainsAny(v, " \t\"") {
			v = `"` + strings.ReplaceAll(v, `"`, "") + `"`
		}
		terms = append(terms, field+":"+v)
	}
	add("state", states)
	add("tenant", f.Tenants)
	add("tool", f.Tools)
	add("owner", f.Owners)
	add("key", f.Keys)
	ids := make([]string, len(f.IDs))
	for i, id := range f.IDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	add("id", ids)
	if f.MinAge > 0 {
		terms = append(terms, "age>"+durationText(f.MinAge))
	}
	if f.MaxAge > 0 {
		terms = append(terms, "age<"+durationText(f.MaxAge))
	}
	if f.ExpiresWithin > 0 {
		terms = append(terms, "expires<"+durationText(f.ExpiresWithin))
	}
	if f.ExpiresAfter > 0 {
		terms = append(terms, "expires>"+durationText(f.ExpiresAfter))
	}
	return strings.Join(terms, " ")
}
