package cli

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// opsdesk's -o json convention, applied in one place (writeJSON) to every
// command's output, whatever type the value comes from:
//   - a time never set is null, never "0001-01-01T00:00:00Z";
//   - an empty list is [], never null;
//   - a duration is seconds, in a field named with a _seconds suffix
//     ("retention_seconds": 604800), never bare nanoseconds.
//
// conventional rebuilds v so: structs become objects in their fields'
// order under their json names, and values that encode themselves (a
// json.Marshaler or encoding.TextMarshaler other than time.Time, such as
// a json.RawMessage a splicer holds) are left as they are.
func conventional(v any) any { return conventionalValue(reflect.ValueOf(v)) }

var (
	timeType          = reflect.TypeFor[time.Time]()
	durationType      = reflect.TypeFor[time.Duration]()
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func conventionalValue(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	switch {
	case t == timeType:
		if v.Interface().(time.Time).IsZero() {
			return nil
		}
		return v.Interface()
	case t == durationType:
		return seconds(time.Duration(v.Int()))
	case (t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface) && v.IsNil():
		return nil
	case t.Implements(marshalerType) || t.Implements(textMarshalerType):
		return v.Interface()
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return conventionalValue(v.Elem())
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return v.Interface() // bytes: base64, as encoding/json writes them
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = conventionalValue(v.Index(i))
		}
		return out
	case reflect.Map:
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[mapKey(it.Key())] = conventionalValue(it.Value())
		}
		return out
	case reflect.Struct:
		var obj orderedObject
		appendFields(&obj, v)
		return obj
	}
	return v.Interface()
}

// mapKey is a map key as encoding/json writes it.
func mapKey(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return k.String()
	}
	if tm, ok := k.Interface().(encoding.TextMarshaler); ok {
		if b, err := tm.MarshalText(); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(k.Interface())
}

// appendFields adds v's exported fields to obj as encoding/json would
// name and omit them, an embedded struct's fields in its place.
func appendFields(obj *orderedObject, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		sf, fv := t.Field(i), v.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				ft, fv = ft.Elem(), fv.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != timeType {
				appendFields(obj, fv)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if (hasOpt(opts, "omitempty") && emptyValue(fv)) || (hasOpt(opts, "omitzero") && fv.IsZero()) {
			continue
		}
		if sf.Type == durationType && !strings.HasSuffix(name, "_seconds") {
			name += "_seconds"
		}
		*obj = append(*obj, field{name, conventionalValue(fv)})
	}
}

func hasOpt(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// emptyValue is encoding/json's omitempty test.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

type field struct {
	name  string
	value any
}

// orderedObject is a JSON object whose members keep their order: a
// struct's fields read in the order its type declares them.
type orderedObject []field

// MarshalJSON writes the members in order.
func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.name)
		if err != nil {
			return nil, err
		}
		val, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
