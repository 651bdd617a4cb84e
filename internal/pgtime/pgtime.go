// Package pgtime reads PostgreSQL's timestamps into time.Time, all of them.
//
// A timestamptz may be 'infinity' or '-infinity', which pgx refuses to scan
// into a time.Time, or a year from 4713 BC to 294276, which RFC 3339 and
// encoding/json cannot write. The state machine keeps services from
// writing such times (migration 00024), but a superuser or a restored
// backup can, and one such record made every read of its tenant fail. Here
// they read as two instants that no reader has to treat specially to stay
// up: Infinity for 'infinity' and every time after year 9999, and
// NegativeInfinity for '-infinity' and every time before year 1 (Go's zero
// time, which readers take for NULL, included). Both are written by RFC
// 3339 and JSON; the console shows them as "never" and "-infinity".
package pgtime

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/opsdesk/opsdesk/ops/opsmodel"
)

// Infinity and NegativeInfinity are opsmodel's, named here for ops,
// which reads its records' times through this package: the last
// nanosecond of year 9999, which no timestamptz holds, and the first
// instant of year 0 (1 BC).
var (
	Infinity         = opsmodel.Infinity
	NegativeInfinity = opsmodel.NegativeInfinity
)

// FromTimestamptz is v as a time.Time: NULL is the zero time, an infinite
// or out-of-range time Infinity or NegativeInfinity.
func FromTimestamptz(v pgtype.Timestamptz) time.Time {
	switch t := Exact(v); {
	case t.IsZero(): // NULL
		return t
	case !t.Before(Infinity):
		return Infinity
	case !t.After(time.Time{}):
		return NegativeInfinity
	default:
		return t
	}
}

// Exact is v as a time.Time that goes back as it came (ToTimestamptz):
// 'infinity' and '-infinity' are Infinity and NegativeInfinity, other
// times are as they are, beyond year 9999 too, and NULL is the zero time.
// A list's cursor needs it: Infinity stands for every time after year
// 9999, and a cursor at it would skip the records from there to
// 'infinity'. (A time at the first instant of year 1, Go's zero time, is
// NegativeInfinity: the zero time means none.)
func Exact(v pgtype.Timestamptz) time.Time {
	switch {
	case !v.Valid:
		return time.Time{}
	case v.InfinityModifier == pgtype.Infinity:
		return Infinity
	case v.InfinityModifier == pgtype.NegativeInfinity, v.Time.IsZero():
		return NegativeInfinity
	}
	return v.Time
}

// ToTimestamptz is t as a timestamptz parameter: Infinity is 'infinity'
// and NegativeInfinity '-infinity', so that a time read goes back as it
// came; any other time is itself.
func ToTimestamptz(t time.Time) pgtype.Timestamptz {
	switch {
	case t.Equal(Infinity):
		return pgtype.Timestamptz{Valid: true, InfinityModifier: pgtype.Infinity}
	case t.Equal(NegativeInfinity):
		return pgtype.Timestamptz{Valid: true, InfinityModifier: pgtype.NegativeInfinity}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// Register makes the connection whose type map m is scan every
// timestamptz into a *time.Time as FromTimestamptz reads it (NULL stays an
// error, as pgx has it: a **time.Time takes NULL), and send every time.Time
// for a timestamptz as ToTimestamptz writes it. Other types (date,
// timestamp) and targets (pgtype.Timestamptz) are pgx's. Call it before
// the connection's first query, from pgxpool.Config.AfterConnect.
func Register(m *pgtype.Map) {
	inner, ok := m.TypeForOID(pgtype.TimestamptzOID)
	if !ok {
		panic("pgtime: the type map has no timestamptz")
	}
	m.RegisterType(&pgtype.Type{Name: inner.Name, OID: inner.OID, Codec: codec{inner.Codec}})
}

// codec is timestamptz's codec but for time.Time, which it reads and
// writes in full.
type codec struct{ pgtype.Codec }

func (c codec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*time.Time); ok {
		if next := c.Codec.PlanScan(m, oid, format, (*scanned)(nil)); next != nil {
			return scanPlan{next}
		}
	}
	return c.Codec.PlanScan(m, oid, format, target)
}

func (c codec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(time.Time); ok {
		if next := c.Codec.PlanEncode(m, oid, format, pgtype.Timestamptz{}); next != nil {
			return encodePlan{next}
		}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// scanned is a *time.Time that a timestamptz scans into.
type scanned time.Time

func (s *scanned) ScanTimestamptz(v pgtype.Timestamptz) error {
	if !v.Valid {
		return fmt.Errorf("cannot scan NULL into *time.Time")
	}
	*s = scanned(FromTimestamptz(v))
	return nil
}

type scanPlan struct{ next pgtype.ScanPlan }

func (p scanPlan) Scan(src []byte, dst any) error {
	return p.next.Scan(src, (*scanned)(dst.(*time.Time)))
}

type encodePlan struct{ next pgtype.EncodePlan }

func (p encodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(ToTimestamptz(value.(time.Time)), buf)
}
