package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/ui"
)

type conflictsShowOptions struct {
	Conflict int64
	Reveal   bool
	Reason   string
	Output   string
}

func newConflictsShowCmd(g *globalFlags) *cobra.Command {
	var opts conflictsShowOptions
	cmd := &cobra.Command{
		Use:   "show ID [--reveal --reason TEXT] [--conflict N]",
		Short: "List an operation's conflicting attempts, or reveal one beside the original with what differs (audited)",
		Long: "List the conflicting attempts on operation ID (a key reused with another request). With\n" +
			"--reveal, show the latest one (or --conflict N) beside the record's original request, the\n" +
			"differing fields marked: ~ changed, - only in the original, + only in the attempt. Paths are\n" +
			"JSON Pointers (RFC 6901: ~1 is a / in a key, ~0 a ~); one holding other than printable\n" +
			"ASCII is shown as a JSON string. Revealing is audited before anything is shown, and needs\n" +
			"--reason and the operator role. Conflicts recorded before schema version 19 kept only\n" +
			"fingerprints: their attempted request is shown as not recorded.",
		Example: "  opsdesk conflicts show 48213\n" +
			"  opsdesk conflicts show 48213 --reveal --reason 'caller reports a double charge'\n" +
			"  opsdesk conflicts show 48213 --conflict 7 --reveal --reason 'INC-2231' -o json",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if err := opts.check(); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !opts.Reveal {
				return withView(cmd, g, func(ctx context.Context, v *storeview.Store) error {
					d, c, err := conflictOf(ctx, v, id, opts.Conflict)
					if err != nil {
						return err
					}
					if opts.Conflict == 0 {
						c = nil // all of them
					}
					return writeConflicts(out, d, c, opts.Output)
				})
			}
			return withWriter(cmd, g, func(ctx context.Context, w *writer) error {
				d, c, err := conflictOf(ctx, w.view, id, opts.Conflict)
				if err != nil {
					return err
				}
				if c == nil {
					return fmt.Errorf("operation %d has no conflicting attempts: nothing to reveal", id)
				}
				rev, res, err := w.desk.RevealConflict(ctx, c.ID, opts.Reason)
				if _, refused := errors.AsType[*reconcile.RefusedError](err); refused {
					return writeDecision(out, opts.Output, fmt.Sprintf("reveal of conflict #%d on %d", c.ID, id), res, err)
				}
				if err != nil {
					return err
				}
				rev.OpenSealed(w.cfg.Context.Keyring, ops.Identity{Tenant: d.Tenant, Tool: d.Tool, Key: d.Key})
				return writeConflictReveal(out, d, c, rev, res, opts.Output)
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&opts.Conflict, "conflict", 0, "the conflict to show (its #number; default: the latest)")
	f.BoolVar(&opts.Reveal, "reveal", false, "show both requests and what differs (audited; needs --reason)")
	f.StringVar(&opts.Reason, "reason", "", "with --reveal: why you need to see them, kept in the audit trail")
	f.StringVarP(&opts.Output, "output", "o", "table", "table|json")
	return cmd
}

// check refuses what would be refused anyway, before anything is audited.
func (o conflictsShowOptions) check() error {
	switch {
	case o.Output != "table" && o.Output != "json":
		return checkOutput(o.Output)
	case o.Conflict < 0:
		return usagef("--conflict %d: conflicts are numbered from 1", o.Conflict)
	case o.Reveal && strings.TrimFunc(o.Reason, reconcile.IsSpace) == "":
		return usagef("--reveal needs --reason: revealing the requests is audited")
	case !o.Reveal && o.Reason != "":
		return usagef("--reason goes with --reveal")
	case o.Reveal:
		return checkReason(o.Reason, "revealing the requests is audited")
	}
	return nil
}

// conflictOf reads record id and its conflict number n, or its latest
// when n is 0 (nil: it has none).
func conflictOf(ctx context.Context, v *storeview.Store, id, n int64) (readmodel.Detail, *readmodel.Conflict, error) {
	d, err := v.Get(ctx, id)
	if errors.Is(err, readmodel.ErrNotFound) {
		return d, nil, fmt.Errorf("no operation %d (or not visible to this role)", id)
	}
	if err != nil {
		return d, nil, err
	}
	if n == 0 {
		if len(d.Conflicts) == 0 {
			return d, nil, nil
		}
		return d, &d.Conflicts[len(d.Conflicts)-1], nil // ordered by id
	}
	i := slices.IndexFunc(d.Conflicts, func(c readmodel.Conflict) bool { return c.ID == n })
	if i < 0 {
		return d, nil, usagef("conflict #%d is not one of operation %d's (%s)", n, id, conflictNumbers(d.Conflicts))
	}
	return d, &d.Conflicts[i], nil
}

func conflictNumbers(cs []readmodel.Conflict) string {
	if len(cs) == 0 {
		return "it has none"
	}
	nums := make([]string, 0, min(len(cs), 10))
	for _, c := range cs[max(0, len(cs)-10):] {
		nums = append(nums, fmt.Sprintf("#%d", c.ID))
	}
	if len(cs) > 10 {
		return "the latest: " + strings.Join(nums, ", ")
	}
	return strings.Join(nums, ", ")
}

// conflictsJSON is `conflicts show -o json` without --reveal.
type conflictsJSON struct {
	OperationID    int64                `json:"operation_id"`
	Tenant         string               `json:"tenant"`
	Tool           string               `json:"tool"`
	Key            string               `json:"key"`
	FingerprintTag string               `json:"fingerprint_tag"`
	ToolVersion    string               `json:"tool_version"`
	Conflicts      []readmodel.Conflict `json:"conflicts"`
}

// writeConflicts lists record d's conflicts, or conflict c alone.
func writeConflicts(w io.Writer, d readmodel.Detail, c *readmodel.Conflict, output string) error {
	list := d.Conflicts
	if c != nil {
		list = []readmodel.Conflict{*c}
	}
	if output == "json" {
		return writeJSON(w, conflictsJSON{OperationID: d.ID, Tenant: d.Tenant, Tool: d.Tool, Key: d.Key,
			FingerprintTag: d.FingerprintTag, ToolVersion: d.ToolVersion, Conflicts: append([]readmodel.Conflict{}, list...)})
	}
	more := fmt.Sprintf("opsdesk conflicts show %d -o json prints it whole.", d.ID)
	fmt.Fprintf(w, "operation %d %s: %s\n", d.ID, termtext.Clean(identityText(d.Row)), counted(len(d.Conflicts), "conflicting attempt"))
	for _, c := range list {
		fmt.Fprintf(w, "  %s\n", termtext.Clean(conflictText(d, c, more)))
	}
	if len(d.Conflicts) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "opsdesk conflicts show %d --reveal --reason TEXT shows the latest beside the original, "+
		"with what differs (audited); --conflict N another\n", d.ID)
	return err
}

// conflictRevealJSON is `conflicts show --reveal -o json`.
type conflictRevealJSON struct {
	OperationID int64              `json:"operation_id"`
	Tenant      string             `json:"tenant"`
	Tool        string             `json:"tool"`
	Key         string             `json:"key"`
	Conflict    readmodel.Conflict `json:"conflict"`
	reconcile.ConflictReveal
	Audit reconcile.Result `json:"audit"`
}

// Bounds of a revealed conflict's text, whose requests a service may
// make of any size: a request's line (and a differing field's path) is
// cut after fieldBytes (cellBytes), the list of differing fields and each
// request after revealLines lines. -o json prints them whole.
const revealLines = 1000

// writeConflictReveal shows conflict c of record d as revealed: the
// differing fields, then each request laid out with them marked. The
// text goes out line by line, each cut, so that it costs no copy of the
// requests; JSON holds them out of the encoding (splicer).
func writeConflictReveal(w io.Writer, d readmodel.Detail, c *readmodel.Conflict, rev reconcile.ConflictReveal, res reconcile.Result, output string) error {
	if output == "json" {
		// Every stored JSON value goes out as the database stored it, a
		// slice at a time, never encoded (or copied) whole.
		var s splicer
		held := rev
		held.Original.Request, held.Attempted.Request = s.hold(rev.Original.Request), s.hold(rev.Attempted.Request)
		held.Diffs = make([]reconcile.Diff, len(rev.Diffs))
		for i, df := range rev.Diffs {
			df.Original, df.Attempted = s.hold(df.Original), s.hold(df.Attempted)
			held.Diffs[i] = df
		}
		return s.write(w, conflictRevealJSON{OperationID: d.ID, Tenant: d.Tenant, Tool: d.Tool, Key: d.Key,
			Conflict: *c, ConflictReveal: held, Audit: res})
	}
	more := fmt.Sprintf("opsdesk conflicts show %d --conflict %d --reveal --reason … -o json prints it whole.", d.ID, c.ID)
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "operation %d %s, conflicting attempt %s\n", d.ID, termtext.Clean(identityText(d.Row)), termtext.Clean(conflictText(d, *c, more)))
	fmt.Fprintf(b, "revealed: audit record %s\n\n", termtext.Clean(res.AuditRef()))
	switch {
	case rev.DiffError != "":
		fmt.Fprintf(b, "differences: %s\n", shown(rev.DiffError, fieldBytes, more))
	case len(rev.Diffs) == 0:
		b.WriteString("differences: none field by field; the requests differ only in how they are written\n")
	default:
		fmt.Fprintf(b, "%d differing fields (JSON Pointer paths; ~ changed, - only in the original, + only in the attempt):\n", len(rev.Diffs))
		listed := rev.Diffs[:min(len(rev.Diffs), revealLines)]
		paths := make([]string, len(listed))
		width := 0
		for i, df := range listed {
			paths[i] = shown(reconcile.PointerText(df.Path), cellBytes, more)
			width = max(width, min(40, utf8.RuneCountInString(paths[i])))
		}
		for i, df := range listed {
			p := paths[i]
			fmt.Fprintf(b, "  %s %s%s  %s → %s\n", reconcile.DiffMark(df.Kind), p, strings.Repeat(" ", max(0, width-utf8.RuneCountInString(p))),
				valueText(df.Original), valueText(df.Attempted))
		}
		if n := len(rev.Diffs) - len(listed); n > 0 {
			fmt.Fprintf(b, "  … %d more differing fields not shown. %s\n", n, more)
		}
	}
	writeSide(b, fmt.Sprintf("original request (operation %d, %s)", d.ID, d.FingerprintTag), rev.Original, rev.Diffs, more)
	writeSide(b, fmt.Sprintf("attempted request (conflict #%d, %s)", c.ID, c.FingerprintTag), rev.Attempted, rev.Diffs, more)
	return b.Flush()
}

// writeSide lays one request out, the lines of differing fields marked,
// each line cut after fieldBytes and the request after revealLines lines;
// more says how to see them whole.
func writeSide(b *bufio.Writer, title string, side reconcile.ConflictSide, diffs []reconcile.Diff, more string) {
	fmt.Fprintf(b, "\n%s", shown(title, fieldBytes, more))
	if side.Request == nil {
		fmt.Fprintf(b, ": %s\n", shown(side.NotRecorded, fieldBytes, more))
		return
	}
	b.WriteString(":\n")
	if kid, ok := opsmodel.EncryptedKeyID(side.Request); ok {
		why := side.Sealed
		if why == "" {
			why = "opsdesk holds no key to decrypt it"
		}
		fmt.Fprintf(b, "  encrypted under key id %s: the service sealed this request at rest (Config.Keyring), "+
			"and %s; it is not compared\n  %s\n", shown(strconv.Quote(kid), fieldBytes, ""), shown(why, fieldBytes, ""), shown(string(side.Request), fieldBytes, more))
		return
	}
	switch {
	case side.Decrypted:
		fmt.Fprintf(b, "  decrypted here under key id %s with this context's reveal_keys: the store keeps it encrypted\n",
			shown(strconv.Quote(side.KeyID), fieldBytes, ""))
	case !side.Fingerprinted:
		b.WriteString("  warning: this request does not hash to the fingerprint recorded for it: " +
			"it is not the request that was compared (written by hand or by another program)\n")
	}
	lines, err := reconcile.RequestLines(side.Request, diffs)
	if err != nil {
		fmt.Fprintf(b, "  (cannot lay it out: %s)\n  %s\n", shown(err.Error(), fieldBytes, ""),
			shown(string(termtext.EscapeControls(side.Request)), fieldBytes, more))
		return
	}
	for i, l := range lines {
		if i == revealLines {
			fmt.Fprintf(b, "  … %d more lines not shown. %s\n", len(lines)-i, more)
			break
		}
		// Cut before escaping: a line of any size costs fieldBytes.
		l.Text = ui.Cut(l.Text, fieldBytes, more)
		fmt.Fprintf(b, "  %s %s%s\n", reconcile.DiffMark(l.Mark), l.Indent(), termtext.Clean(l.Shown()))
	}
}

// maxValueBytes bounds a value in the list of differences; the requests
// below show it whole.
const maxValueBytes = 60

// valueText is a differing field's value in the list, cleaned
// (reconcile.ValueText).
func valueText(v json.RawMessage) string {
	return termtext.Clean(reconcile.ValueText(v, maxValueBytes))
}
