package reconcile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DiffKind is how a field differs between the original request and the
// attempted one.
type DiffKind string

// Kinds of difference.
const (
	DiffChanged DiffKind = "changed" // on both sides, with other values
	DiffRemoved DiffKind = "removed" // in the original request only
	DiffAdded   DiffKind = "added"   // in the attempted request only
)

// Diff is one field that differs between two requests.
type Diff struct {
	// Path is the field's JSON Pointer (RFC 6901): "/intent/amount",
	// "/intent/items/0". A key's "~" is written "~0" and its "/" "~1", so
	// a key holding dots or slashes names one field only; "" is the whole
	// request.
	Path string   `json:"path"`
	Kind DiffKind `json:"kind"`
	// Original and Attempted are the field's JSON text on each side, as
	// stored; nil on the side that does not have the field.
	Original  json.RawMessage `json:"original,omitempty"`
	Attempted json.RawMessage `json:"attempted,omitempty"`
}

// DiffRequests lists the fields that differ between two JSON values, in
// the original's order (fields only the attempted request has after those
// of their object). Objects are compared by key whatever their order,
// arrays item by item (an item inserted in front shows as every item
// after it changed); a field whose type differs, or that one side lacks,
// is one Diff with its whole value. Strings compare by their characters
// (escapes aside) and numbers by their value as IEEE 754 doubles, as the
// fingerprint (RFC 8785) compares them. Any depth and size is compared
// without recursion; a value that is not JSON is an error.
func DiffRequests(original, attempted json.RawMessage) ([]Diff, error) {
	a, err := parseJSON(original)
	if err != nil {
		return nil, fmt.Errorf("read the original request: %w", err)
	}
	b, err := parseJSON(attempted)
	if err != nil {
		return nil, fmt.Errorf("read the attempted request: %w", err)
	}
	var diffs []Diff
	// A stack of comparisons and of differences found, taken in document
	// order: each object's or array's are pushed in reverse.
	type step struct {
		path *segment
		a, b *jsonNode
		diff *Diff // a difference to emit, found while pushing
	}
	stack := []step{{a: a, b: b}}
	var next []step
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s.diff != nil {
			s.diff.Path = s.path.pointer()
			diffs = append(diffs, *s.diff)
			continue
		}
		x, y := s.a, s.b
		switch {
		case x.kind != y.kind:
			diffs = append(diffs, Diff{Path: s.path.pointer(), Kind: DiffChanged, Original: x.raw, Attempted: y.raw})
			continue
		case x.kind == kindObject:
			next = next[:0]
			yi := y.keyIndex()
			for i, k := range x.keys {
				if x.keyIndex()[k] != i {
					continue // a duplicate key: its last value counts
				}
				p := &segment{parent: s.path, token: k}
				if j, ok := yi[k]; ok {
					next = append(next, step{path: p, a: x.items[i], b: y.items[j]})
				} else {
					next = append(next, step{path: p, diff: &Diff{Kind: DiffRemoved, Original: x.items[i].raw}})
				}
			}
			xi := x.keyIndex()
			for j, k := range y.keys {
				if _, ok := xi[k]; !ok && yi[k] == j {
					next = append(next, step{path: &segment{parent: s.path, token: k},
						diff: &Diff{Kind: DiffAdded, Attempted: y.items[j].raw}})
				}
			}
		case x.kind == kindArray:
			next = next[:0]
			for i := 0; i < max(len(x.items), len(y.items)); i++ {
				p := &segment{parent: s.path, token: strconv.Itoa(i)}
				switch {
				case i >= len(y.items):
					next = append(next, step{path: p, diff: &Diff{Kind: DiffRemoved, Original: x.items[i].raw}})
				case i >= len(x.items):
					next = append(next, step{path: p, diff: &Diff{Kind: DiffAdded, Attempted: y.items[i].raw}})
				default:
					next = append(next, step{path: p, a: x.items[i], b: y.items[i]})
				}
			}
		default:
			if !x.sameScalar(y) {
				diffs = append(diffs, Diff{Path: s.path.pointer(), Kind: DiffChanged, Original: x.raw, Attempted: y.raw})
			}
			continue
		}
		for i := len(next) - 1; i >= 0; i-- {
			stack = append(stack, next[i])
		}
	}
	return diffs, nil
}

// segment is one step of a path, linked to its parent: a path is spelled
// out only for a difference, so a deep value costs no string per level.
type segment struct {
	parent *segment
	token  string
}

// pointer spells the path out as a JSON Pointer (RFC 6901).
func (s *segment) pointer() string {
	var tokens []string
	for ; s != nil; s = s.parent {
		tokens = append(tokens, s.token)
	}
	var b strings.Builder
	for i := len(tokens) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(tokens[i]))
	}
	return b.String()
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// ParsePointer splits a JSON Pointer (RFC 6901) into its reference tokens,
// "~1" and "~0" read back as "/" and "~".
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON Pointer %q does not start with /", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("JSON Pointer %q has a ~ that is neither ~0 nor ~1", p)
			}
		}
		tokens[i] = pointerUnescaper.Replace(t)
	}
	return tokens, nil
}

var pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")

type jsonKind uint8

const (
	kindNull jsonKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// jsonNode is a parsed JSON value that keeps its text.
type jsonNode struct {
	kind jsonKind
	raw  json.RawMessage // the value's text in the input
	// scalar is a number's text, "true" or "false". A string is compared
	// by its text in raw, never copied out (strings may be megabytes).
	scalar string
	keys   []string    // an object's keys, in order
	items  []*jsonNode // an array's items, or an object's values (by keys)
	start  int         // where an open object or array began
	index  map[string]int
}

// keyIndex maps an object's keys to their last position.
func (n *jsonNode) keyIndex() map[string]int {
	if n.index == nil {
		n.index = make(map[string]int, len(n.keys))
		for i, k := range n.keys {
			n.index[k] = i
		}
	}
	return n.index
}

// sameScalar tells whether two scalars of one kind are equal.
func (n *jsonNode) sameScalar(o *jsonNode) bool {
	if n.kind == kindString {
		if bytes.Equal(n.raw, o.raw) {
			return true
		}
		if plainString(n.raw) && plainString(o.raw) {
			return false // no escapes: other text, other characters
		}
		return decodeString(n.raw) == decodeString(o.raw)
	}
	if n.scalar == o.scalar {
		return true
	}
	if n.kind != kindNumber {
		return false
	}
	// As RFC 8785 reads numbers: 1.0, 1 and 1e0 are one double. A number
	// out of the double's range compares by its text.
	x, errX := strconv.ParseFloat(n.scalar, 64)
	y, errY := strconv.ParseFloat(o.scalar, 64)
	return errX == nil && errY == nil && x == y
}

// plainString tells whether a JSON string's text is its characters,
// quoted: no escape, valid UTF-8.
func plainString(raw []byte) bool {
	return bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw)
}

// decodeString is a JSON string's characters (invalid UTF-8 as U+FFFD, as
// encoding/json reads it).
func decodeString(raw []byte) string {
	if plainString(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // parseJSON checked it is a string
	return s
}

// parseJSON reads one JSON value (RFC 8259) into a tree, without
// recursion and without a depth limit, keeping each value's text where it
// stands: a value of any size is neither buffered nor decoded, as a
// json.Decoder would (which cost five times a 32 MiB request), and
// json.Valid, which copies nothing, stops at 10,000 levels.
func parseJSON(raw []byte) (*jsonNode, error) {
	const (
		wantValue = iota // a value; just after '[', or its ']'
		wantKey          // a key; just after '{', or its '}'
		wantColon
		wantNext // ',' or the end of the object or array
	)
	var root *jsonNode
	var open []*jsonNode
	state, first := wantValue, false // first: just after '{' or '['
	bad := func(i int) error {
		return fmt.Errorf("invalid character %q at byte %d of JSON input", raw[i], i)
	}
	closeAt := func(i int) {
		top := open[len(open)-1]
		top.raw = raw[top.start : i+1]
		open = open[:len(open)-1]
		state = wantNext
	}
	for i := skipSpace(raw, 0); i < len(raw); i = skipSpace(raw, i) {
		c := raw[i]
		switch state {
		case wantColon:
			if c != ':' {
				return nil, bad(i)
			}
			i++
			state, first = wantValue, false
			continue
		case wantNext:
			if len(open) == 0 {
				return nil, fmt.Errorf("more than one JSON value: %w", bad(i))
			}
			top := open[len(open)-1]
			switch {
			case c == ',':
				state, first = wantValue, false
				if top.kind == kindObject {
					state = wantKey
				}
			case c == '}' && top.kind == kindObject, c == ']' && top.kind == kindArray:
				closeAt(i)
			default:
				return nil, bad(i)
			}
			i++
			continue
		case wantKey:
			switch {
			case c == '}' && first:
				closeAt(i)
			case c == '"':
				end, err := stringEnd(raw, i)
				if err != nil {
					return nil, err
				}
				top := open[len(open)-1]
				top.keys = append(top.keys, decodeString(raw[i:end]))
				i, state = end, wantColon
				continue
			default:
				return nil, bad(i)
			}
			i++
			continue
		}
		if c == ']' && first {
			closeAt(i)
			i++
			continue
		}
		// A value.
		var n *jsonNode
		end := i + 1
		switch {
		case c == '{' || c == '[':
			n = &jsonNode{kind: kindArray, start: i}
			state = wantValue
			if c == '{' {
				n.kind, state = kindObject, wantKey
			}
		case c == '"':
			var err error
			if end, err = stringEnd(raw, i); err != nil {
				return nil, err
			}
			n = &jsonNode{kind: kindString, raw: raw[i:end]}
		case c == '-' || (c >= '0' && c <= '9'):
			if end = numberEnd(raw, i); end < 0 {
				return nil, fmt.Errorf("invalid number at byte %d of JSON input", i)
			}
			n = &jsonNode{kind: kindNumber, raw: raw[i:end], scalar: string(raw[i:end])}
		case bytes.HasPrefix(raw[i:], []byte("true")), bytes.HasPrefix(raw[i:], []byte("false")):
			end = i + len("true")
			if c == 'f' {
				end = i + len("false")
			}
			n = &jsonNode{kind: kindBool, raw: raw[i:end], scalar: string(raw[i:end])}
		case bytes.HasPrefix(raw[i:], []byte("null")):
			end = i + 4
			n = &jsonNode{kind: kindNull, raw: raw[i:end]}
		default:
			return nil, bad(i)
		}
		if len(open) == 0 {
			root = n
		} else {
			top := open[len(open)-1]
			top.items = append(top.items, n)
		}
		if n.kind == kindObject || n.kind == kindArray {
			open = append(open, n)
			first = true
		} else {
			state = wantNext
		}
		i = end
	}
	if root == nil || len(open) > 0 {
		return nil, errors.New("unexpected end of JSON input")
	}
	return root, nil
}

// skipSpace skips JSON whitespace.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the JSON string that starts at i, or
// why it is not one.
func stringEnd(raw []byte, i int) (int, error) {
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			return j + 1, nil
		case c < 0x20:
			return 0, fmt.Errorf("invalid character %q in a string at byte %d of JSON input", c, j)
		case c == '\\':
			j++
			if j == len(raw) {
				break
			}
			switch raw[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(raw) || !isHex(raw[j+1]) || !isHex(raw[j+2]) || !isHex(raw[j+3]) || !isHex(raw[j+4]) {
					return 0, fmt.Errorf("invalid escape in a string at byte %d of JSON input", j-1)
				}
				j += 4
			default:
				return 0, fmt.Errorf("invalid escape in a string at byte %d of JSON input", j-1)
			}
		}
	}
	return 0, errors.New("unexpected end of JSON input: a string is not closed")
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// numberEnd is the index just past the JSON number that starts at i, or
// -1 when none does: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(raw []byte, i int) int {
	digits := func(j int) int {
		k := j
		for k < len(raw) && raw[k] >= '0' && raw[k] <= '9' {
			k++
		}
		return k
	}
	j := i
	if raw[j] == '-' {
		j++
	}
	switch {
	case j < len(raw) && raw[j] == '0':
		j++
	case j < len(raw) && raw[j] >= '1' && raw[j] <= '9':
		j = digits(j)
	default:
		return -1
	}
	if j < len(raw) && raw[j] == '.' {
		k := digits(j + 1)
		if k == j+1 {
			return -1
		}
		j = k
	}
	if j < len(raw) && (raw[j] == 'e' || raw[j] == 'E') {
		j++
		if j < len(raw) && (raw[j] == '+' || raw[j] == '-') {
			j++
		}
		k := digits(j)
		if k == j {
			return -1
		}
		j = k
	}
	return j
}

// RequestLine is one line of a request laid out for people, one field or
// bracket a line, as a console or a command shows it beside the other
// request.
type RequestLine struct {
	// Depth is the line's nesting depth: how far to indent it.
	Depth int
	// Text is the line's JSON text, such as `"amount": 100,` or
	// `"items": [`: keys and values escaped as JSON (a caller still cleans
	// what JSON leaves raw, such as C1 control characters).
	Text string
	// Mark is the difference the line is part of, "" when none: a field
	// that differs, or any line inside it.
	Mark DiffKind
}

// RequestLines lays request out one field a line, each line of a field in
// diffs (DiffRequests's) marked with its kind. Values keep their stored
// text; keys are written as JSON strings. Any depth is laid out without
// recursion.
func RequestLines(request json.RawMessage, diffs []Diff) ([]RequestLine, error) {
	root, err := parseJSON(request)
	if err != nil {
		return nil, fmt.Errorf("read the request: %w", err)
	}
	marks := &markTrie{}
	for _, d := range diffs {
		tokens, err := ParsePointer(d.Path)
		if err != nil {
			return nil, err
		}
		t := marks
		for _, tok := range tokens {
			if t.children == nil {
				t.children = map[string]*markTrie{}
			}
			if t.children[tok] == nil {
				t.children[tok] = &markTrie{}
			}
			t = t.children[tok]
		}
		t.kind = d.Kind
	}
	type task struct {
		n       *jsonNode
		prefix  string // `"key": ` in an object
		depth   int
		comma   bool
		marks   *markTrie // the diffs under this value (nil: none)
		mark    DiffKind
		closing bool
	}
	var lines []RequestLine
	stack := []task{{n: root, marks: marks}}
	var children []task
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		comma := ""
		if t.comma {
			comma = ","
		}
		if t.closing {
			closer := "]"
			if t.n.kind == kindObject {
				closer = "}"
			}
			lines = append(lines, RequestLine{Depth: t.depth, Text: closer + comma, Mark: t.mark})
			continue
		}
		if t.mark == "" && t.marks != nil {
			t.mark = t.marks.kind
		}
		n := t.n
		if (n.kind != kindObject && n.kind != kindArray) || len(n.items) == 0 {
			// One copy of the value's text, however large (a
			// concatenation with string(n.raw) makes two).
			var text strings.Builder
			text.Grow(len(t.prefix) + len(n.raw) + len(comma))
			text.WriteString(t.prefix)
			text.Write(n.raw)
			text.WriteString(comma)
			lines = append(lines, RequestLine{Depth: t.depth, Text: text.String(), Mark: t.mark})
			continue
		}
		opener := "["
		if n.kind == kindObject {
			opener = "{"
		}
		lines = append(lines, RequestLine{Depth: t.depth, Text: t.prefix + opener, Mark: t.mark})
		t.closing = true
		stack = append(stack, t)
		children = children[:0]
		for i, item := range n.items {
			c := task{n: item, depth: t.depth + 1, comma: i < len(n.items)-1, mark: t.mark}
			token := strconv.Itoa(i)
			if n.kind == kindObject {
				token = n.keys[i]
				c.prefix = jsonString(token) + ": "
			}
			if t.marks != nil {
				c.marks = t.marks.children[token]
			}
			children = append(children, c)
		}
		for i := len(children) - 1; i >= 0; i-- {
			stack = append(stack, children[i])
		}
	}
	return lines, nil
}

// markTrie holds the diffs' paths, a level per token.
type markTrie struct {
	kind     DiffKind
	children map[string]*markTrie
}

// jsonString is s as a JSON string, without HTML escapes.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
