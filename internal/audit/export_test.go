package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/auditreport"
	"github.com/opsdesk/opsdesk/internal/dbtest"
)

// export writes an export as p sees the trail.
func export(t *testing.T, p *dbtest.Person, opts ExportOpts) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	_, err := Export(t.Context(), p.Pool, opts, &buf)
	require.NoError(t, err)
	return bytes.NewReader(buf.Bytes())
}

// TestExportHugeRecord: a record whose details exceed 16 MiB, as the
// functions before the cap on stored text could write, exports and
// verifies (found by review: the reader stopped at 16 MiB lines).
func TestExportHugeRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.chain(t, "acme", 2)
	// Appended as audit_append did before migration 00016 cut every field:
	// seq, time, role and hash assigned under the chain head's lock.
	_, err := b.d.Admin.Exec(t.Context(), `DO $$
DECLARE
    a    opsdesk.audit;
    head opsdesk.audit_heads;
BEGIN
    SELECT * INTO head FROM opsdesk.audit_heads WHERE tenant = 'acme' FOR UPDATE;
    a.tenant := 'acme'; a.seq := head.seq + 1; a.prev_hash := head.hash;
    a.event_id := gen_random_uuid(); a.at := clock_timestamp(); a.role := session_user;
    a.action := 'test:huge'; a.outcome := 'succeeded'; a.reason := 'huge';
    a.forced := false; a.override := false; a.hash_version := 1;
    a.details := jsonb_build_object('blob', repeat('ab', 17 << 19));
    a.hash := opsdesk.audit_hash(a);
    INSERT INTO opsdesk.audit SELECT a.*;
    UPDATE opsdesk.audit_heads SET seq = a.seq, hash = a.hash WHERE tenant = 'acme';
END
$$`)
	require.NoError(t, err)
	b.chain(t, "acme", 1)
	rep := b.verify(t, VerifyOpts{})
	require.True(t, rep.OK, "%+v %s", rep.Break, rep.Problem)
	cp := b.checkpoint(t, newKey(t))

	f := export(t, b.operator, ExportOpts{Checkpoints: []*Checkpoint{cp}})
	longest := 0
	for line := range strings.SplitSeq(string(must(t, f)), "\n") {
		longest = max(longest, len(line))
	}
	require.Greater(t, longest, 16<<20, "a line longer than the old reader's limit")

	out, err := VerifyExport(f, ExportVerifyOpts{PublicKey: cp.PublicKey})
	require.NoError(t, err)
	require.True(t, out.OK, "%+v %s", out.Break, out.Problem)
	require.Equal(t, int64(4), chainOf(t, out.Reports[0], "acme").Records)
	require.True(t, chainOf(t, out.Reports[0], "acme").Checkpoint.Confirmed)
	last, err := LastSeqs(f)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"acme": 4}, last)

	// The huge line edited still breaks where it should.
	data := must(t, f)
	edited := bytes.Replace(data, []byte(`abab`), []byte(`bbab`), 1)
	require.False(t, bytes.Equal(data, edited))
	out, err = VerifyExport(bytes.NewReader(edited), ExportVerifyOpts{})
	require.NoError(t, err)
	require.Equal(t, "tenant acme seq 3: hash does not match its contents", out.Break.Error())
}

func must(t *testing.T, f *bytes.Reader) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := f.Seek(0, 0)
	require.NoError(t, err)
	_, err = buf.ReadFrom(f)
	require.NoError(t, err)
	return buf.Bytes()
}

// exportFile is an export's lines, for editing as an attacker would.
type exportFile []string

func linesOf(t *testing.T, f *bytes.Reader) exportFile {
	t.Helper()
	return strings.Split(strings.TrimSuffix(string(must(t, f)), "\n"), "\n")
}

func (l exportFile) reader() *bytes.Reader {
	return bytes.NewReader([]byte(strings.Join(l, "\n") + "\n"))
}

// drop removes the records of tenant after seq, and the checkpoint lines,
// and makes the end line agree: what someone who edits the file can do.
func (l exportFile) drop(t *testing.T, tenant string, after int64) exportFile {
	t.Helper()
	var out exportFile
	end := ExportEnd{Kind: KindEnd, Chains: []auditreport.Head{}}
	last := map[string]auditreport.Head{}
	for _, line := range l {
		var k struct {
			Kind string `json:"kind"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &k))
		switch k.Kind {
		case KindCheckpoint:
			continue
		case KindEnd:
			continue
		case KindRecord:
			var r exportRecord
			require.NoError(t, json.Unmarshal([]byte(line), &r))
			if r.Tenant == tenant && r.Seq > after {
				continue
			}
			end.Records++
			last[r.Tenant] = auditreport.Head{Tenant: r.Tenant, Seq: r.Seq, Hash: r.Hash}
		}
		out = append(out, line)
	}
	for _, c := range []string{"acme", "globex"} {
		if h, ok := last[c]; ok {
			end.Chains = append(end.Chains, h)
		}
	}
	data, err := json.Marshal(end)
	require.NoError(t, err)
	return append(out, string(data))
}

// TestVerifyExportOutsideCheckpoint: a checkpoint kept outside an export
// finds what an edit of the file hides, and a pinned key with no
// checkpoint at all is a failure (found by review: an export without its
// last record and its checkpoint line, its end line fixed, verified with
// --public-key).
func TestVerifyExportOutsideCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.chain(t, "acme", 4)
	b.chain(t, "globex", 2)
	key := newKey(t)
	pub := key.Public().(ed25519.PublicKey)
	cp := b.checkpoint(t, key)
	whole := linesOf(t, export(t, b.operator, ExportOpts{Checkpoints: []*Checkpoint{cp}}))
	outside := ExportVerifyOpts{PublicKey: pub, Checkpoints: []*Checkpoint{cp}}

	out, err := VerifyExport(whole.reader(), outside)
	require.NoError(t, err)
	require.True(t, out.OK, "%+v %s", out.Break, out.Problem)
	require.Len(t, out.Reports, 2)
	require.Equal(t, 8, out.Reports[0].Checkpoint.Line) // after the header and 6 records
	require.True(t, out.Reports[1].Checkpoint.Outside)
	require.Empty(t, out.Warning)

	cut := whole.drop(t, "acme", 3)
	out, err = VerifyExport(cut.reader(), ExportVerifyOpts{PublicKey: pub})
	require.NoError(t, err)
	require.False(t, out.OK, "a pinned key, and nothing it signed")
	require.Nil(t, out.Break)
	require.Contains(t, out.Problem, "no checkpoint vouches for the tail")
	out, err = VerifyExport(cut.reader(), ExportVerifyOpts{})
	require.NoError(t, err)
	require.True(t, out.OK, "without a key: a warning")
	require.Equal(t, NoCheckpoint, out.Warning)

	out, err = VerifyExport(cut.reader(), outside)
	require.NoError(t, err)
	require.False(t, out.OK)
	require.Equal(t, "tenant acme seq 4 missing: the chain ends at seq 3, but the checkpoint signed seq 4: its tail was removed", out.Break.Error())

	gone := whole.drop(t, "globex", 0)
	out, err = VerifyExport(gone.reader(), outside)
	require.NoError(t, err)
	require.False(t, out.OK)
	require.Equal(t, "tenant globex seqs 1 to 2 missing: the chain is gone, but the checkpoint signed seq 2", out.Break.Error())

	// A header claiming one tenant does not narrow a checkpoint kept
	// outside: only Partial does.
	narrowed := slicesClone(gone)
	narrowed[0] = strings.Replace(narrowed[0], `"kind":"export",`, `"kind":"export","tenant":"acme",`, 1)
	require.NotEqual(t, gone[0], narrowed[0])
	out, err = VerifyExport(narrowed.reader(), outside)
	require.NoError(t, err)
	require.False(t, out.OK)
	require.Nil(t, out.Break)
	require.Equal(t, "the checkpoint signed heads of chains the export does not reach, so they were not checked: globex", out.Reports[0].Problem)
	require.Equal(t, []string{"globex"}, out.Reports[0].Checkpoint.NotChecked)
	outside.Partial = true
	out, err = VerifyExport(narrowed.reader(), outside)
	require.NoError(t, err)
	require.True(t, out.OK, "%+v %s", out.Break, out.Problem)
	require.Equal(t, []string{"globex"}, out.Reports[0].Checkpoint.NotChecked)
}

func slicesClone(l exportFile) exportFile { return append(exportFile{}, l...) }

// TestExportRefusesNothing: an export that would write no chain, or resume
// a chain after its end, is an error, not an empty file that verifies.
func TestExportRefusesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var buf bytes.Buffer
	_, err := Export(t.Context(), b.operator.Pool, ExportOpts{}, &buf)
	require.EqualError(t, err, "no audit chain visible to "+b.operator.Role)
	require.Zero(t, buf.Len(), "nothing written")

	b.chain(t, "acme", 3)
	nosuch := "nosuch"
	_, err = Export(t.Context(), b.operator.Pool, ExportOpts{Tenant: &nosuch}, &buf)
	require.EqualError(t, err, "no audit chain nosuch visible to "+b.operator.Role)
	acme := "acme"
	_, err = Export(t.Context(), b.operator.Pool, ExportOpts{Tenant: &acme, After: map[string]int64{"acme": 9}}, &buf)
	require.ErrorContains(t, err, "the export resumes chain acme after seq 9, but the chain ends at seq 3")
	_, err = Export(t.Context(), b.operator.Pool, ExportOpts{After: map[string]int64{"acme": 3, "globex": 2}}, &buf)
	require.ErrorContains(t, err, "the export resumes chain globex after seq 2, but no audit chain globex visible to "+b.operator.Role)
	require.Zero(t, buf.Len(), "nothing written")

	// Up to date is not an error: an empty segment.
	_, err = Export(t.Context(), b.operator.Pool, ExportOpts{After: map[string]int64{"acme": 3}}, &buf)
	require.NoError(t, err)

	// A chain whose head row was deleted is exported all the same.
	b.tamper(t, `DELETE FROM opsdesk.audit_heads WHERE tenant = 'acme'`)
	f := export(t, b.operator, ExportOpts{})
	last, err := LastSeqs(f)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"acme": 3}, last)
}

// TestVerifyExportNamesRepeatsAndDisorder: a line repeated or moved in an
// export is named as what it is, with the lines concerned (found by
// review: a duplicated line read "seqs 5 to 3 missing").
func TestVerifyExportNamesRepeatsAndDisorder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.chain(t, "acme", 6)
	l := linesOf(t, export(t, b.operator, ExportOpts{}))
	// at is the index of acme's record seq in l (its line is at+1).
	at := func(seq int64) int {
		for i, line := range l {
			var r exportRecord
			require.NoError(t, json.Unmarshal([]byte(line), &r))
			if r.Kind == KindRecord && r.Seq == seq {
				return i
			}
		}
		t.Fatalf("no seq %d", seq)
		return 0
	}
	edited := func(t *testing.T, edit func(l exportFile) exportFile) string {
		t.Helper()
		out, err := VerifyExport(edit(slicesClone(l)).reader(), ExportVerifyOpts{})
		require.NoError(t, err)
		require.False(t, out.OK)
		require.NotNil(t, out.Break)
		return out.Break.Error()
	}
	line := func(seq int64) string { return strconv.Itoa(at(seq) + 1) }

	t.Run("Duplicate", func(t *testing.T) {
		t.Parallel()
		got := edited(t, func(l exportFile) exportFile { return slices.Insert(l, at(4)+1, l[at(4)]) })
		require.Equal(t, "tenant acme seq 4 appears twice (lines "+line(4)+" and "+strconv.Itoa(at(4)+2)+")", got)
	})
	t.Run("DuplicateOfAnotherRecord", func(t *testing.T) {
		t.Parallel()
		got := edited(t, func(l exportFile) exportFile {
			var r4, r5 exportRecord
			require.NoError(t, json.Unmarshal([]byte(l[at(4)]), &r4))
			require.NoError(t, json.Unmarshal([]byte(l[at(5)]), &r5))
			other := strings.Replace(l[at(4)], base64.StdEncoding.EncodeToString(r4.Hash), base64.StdEncoding.EncodeToString(r5.Hash), 1)
			require.NotEqual(t, l[at(4)], other)
			return slices.Insert(l, at(4)+1, other)
		})
		require.Equal(t, "tenant acme seq 4 appears twice (lines "+line(4)+" and "+strconv.Itoa(at(4)+2)+"), as two different records", got)
	})
	t.Run("Repeated", func(t *testing.T) {
		t.Parallel()
		got := edited(t, func(l exportFile) exportFile { return slices.Insert(l, at(5)+1, l[at(2)]) })
		require.Equal(t, "tenant acme seq 2 appears twice (lines "+line(2)+" and "+strconv.Itoa(at(5)+2)+"), the second time after seq 5 (line "+line(5)+")", got)
	})
	t.Run("Swapped", func(t *testing.T) {
		t.Parallel()
		got := edited(t, func(l exportFile) exportFile {
			l[at(3)], l[at(4)] = l[at(4)], l[at(3)]
			return l
		})
		require.Equal(t, "tenant acme seq 3 (line "+line(4)+") is out of order: seq 4 (line "+line(3)+") comes before it", got)
	})
	t.Run("MovedFurther", func(t *testing.T) {
		t.Parallel()
		got := edited(t, func(l exportFile) exportFile {
			moved := l[at(2)]
			l = slices.Delete(l, at(2), at(2)+1)
			return slices.Insert(l, at(5), moved) // after seq 5, now one line up
		})
		require.Equal(t, "tenant acme seq 2 (line "+line(5)+") is out of order: seq 3 (line "+line(2)+") comes before it", got)
	})
	t.Run("Removed", func(t *testing.T) {
		t.Parallel()
		got := edited(t, func(l exportFile) exportFile { return slices.Delete(l, at(3), at(3)+1) })
		require.Equal(t, "tenant acme seq 3 missing: 2 is followed by 4", got, "a line gone for good is still missing")
	})
	t.Run("SeqZero", func(t *testing.T) {
		t.Parallel()
		got := edited(t, func(l exportFile) exportFile {
			l[at(1)] = strings.Replace(l[at(1)], `"seq":1,`, `"seq":0,`, 1)
			return l
		})
		require.Equal(t, "tenant acme seq 0 (line "+line(1)+"): seqs start at 1", got)
	})
}
