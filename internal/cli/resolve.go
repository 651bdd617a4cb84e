package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/opsdesk/opsdesk/config"
	"github.com/opsdesk/opsdesk/internal/readmodel"
	"github.com/opsdesk/opsdesk/internal/storeview"
	"github.com/opsdesk/opsdesk/internal/termtext"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmodel"
	"github.com/opsdesk/opsdesk/reconcile"
	"github.com/opsdesk/opsdesk/reconcile/bulk"
	"github.com/opsdesk/opsdesk/reconcile/desk"
	"github.com/opsdesk/opsdesk/ui"
)

// The commands that write: people's decisions, acknowledgements, reveals
// and access grants. Each connects with the context's DSN (never the read
// replica's) as the person's own role; the database checks what the role
// may do and audits every attempt.

// writer is a connection for one person's writes.
type writer struct {
	cfg  *config.Config
	pool *pgxpool.Pool
	view *storeview.Store
	desk *desk.Desk
}

// newDesk is a person's desk over pool with the configuration's catalog.
func newDesk(pool *pgxpool.Pool, cfg *config.Config) *desk.Desk {
	tools := make(map[string]reconcile.Tool, len(cfg.Tools))
	for name, t := range cfg.Tools {
		tool := reconcile.Tool{Runbook: t.Runbook, Retention: t.Retention}
		if t.Lookup != nil {
			spec := reconcile.LookupSpec(*t.Lookup)
			tool.Lookup = &spec
		}
		tools[name] = tool
	}
	return &desk.Desk{Pool: pool, Tools: tools, DisplayName: cfg.Context.DisplayName}
}

// withWriter opens a writer on the context, unless it is read-only.
func withWriter(cmd *cobra.Command, g *globalFlags, fn func(context.Context, *writer) error) error {
	return withWriterConns(cmd, g, writerConns, fn)
}

// withWriterConns is withWriter with a pool of conns connections.
func withWriterConns(cmd *cobra.Command, g *globalFlags, conns int, fn func(context.Context, *writer) error) error {
	cfg, err := loadConfig(cmd, g)
	if err != nil {
		return err
	}
	if cfg.Context.ReadOnly {
		return usagef("context %s is read-only: decisions are disabled (set read_only: false or use another context)", cfg.Context.Name)
	}
	poolCfg, err := writePoolConfig(cfg.Context)
	if err != nil {
		return err
	}
	poolCfg.MaxConns = int32(conns)
	ctx := cmd.Context()
	pool, err := openChecked(ctx, poolCfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	view := newView(pool, cfg.Context)
	cfg = withRecordedPolicies(ctx, view, cfg)
	return fn(ctx, &writer{cfg: cfg, pool: pool, view: view, desk: newDesk(pool, cfg)})
}

func parseID(arg string) (int64, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("%q is not an operation number (such as 48213)", arg)
	}
	return id, nil
}

type resolveOptions struct {
	As            string
	Reason        string
	ResultRef     string
	Result        string
	Evidence      string
	ExpectVersion int64
	Snooze        time.Duration
	Force         bool
	Override      bool
	NoLookup      bool
	Output        string
}

func newResolveCmd(g *globalFlags) *cobra.Command {
	var opts resolveOptions
	var bulkOpts bulkOptions
	cmd := &cobra.Command{
		Use:   "resolve (ID --as " + decisionNames("|") + " | --filter FILTER --by-lookup) --reason TEXT",
		Short: "Decide the outcome of stuck operations, one or many by their lookups (audited)",
		Long: "Decide what happened to an operation whose outcome nobody saw:\n" + decisionHelp() +
			"The record must be pending with an expired lease (--force over a live one) and still at\n" +
			"--expect-version (default: the version read now). When the tool's catalog entry has a\n" +
			"lookup, it runs first: its answer is evidence, a contradicted decision (another\n" +
			"--result-ref than the one found included) needs --override, and a found reference is the\n" +
			"default --result-ref. Without a lookup no evidence is gathered, which the audit trail\n" +
			"records; deciding an external effect of unknown outcome then needs --no-lookup (after\n" +
			"checking the provider by hand; say what in --evidence). Every attempt is audited, refused or not." +
			bulkHelp,
		Example: "  opsdesk resolve 48213 --as completed --result-ref ch_3MqL --reason 'charge visible in the provider dashboard'\n" +
			"  opsdesk resolve 48213 --as not-executed --expect-version 3 --reason 'provider has no charge for this key'\n" +
			"  opsdesk resolve --filter 'state:stuck tool:charge-card' --by-lookup --reason 'provider outage 05-13, reconciled by lookup'\n" +
			"  opsdesk resolve --filter 'state:stuck tool:charge-card tenant:acme' --by-lookup --accept found --reason '…' --yes -o json",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case cmd.Flags().Changed("filter"):
				return nil // checkBulk says what is wrong
			case len(args) == 0 && cmd.Flags().Changed("by-lookup"):
				return usagef("--by-lookup needs --filter: the stuck records to reconcile, such as --filter 'state:stuck tool:charge-card'")
			case len(args) == 0:
				return usagef("resolve needs an operation number (resolve ID --as DECISION --reason TEXT), " +
					"or --filter FILTER --by-lookup to decide many by their lookups")
			}
			return exactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("filter") {
				bulkOpts.Reason, bulkOpts.Output = opts.Reason, opts.Output
				return runBulkCmd(cmd, g, args, bulkOpts)
			}
			for _, name := range bulkOnlyFlags {
				if cmd.Flags().Changed(name) {
					return usagef("--%s goes with --filter (resolve --filter F --by-lookup); resolve ID decides one record", name)
				}
			}
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if err := checkOutput(opts.Output); err != nil {
				return err
			}
			if err := opts.check(); err != nil {
				return err
			}
			return withWriter(cmd, g, func(ctx context.Context, w *writer) error {
				return runResolve(ctx, w, id, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	f := cmd.Flags()
	addGlobalFlags(f, g)
	f.StringVar(&opts.As, "as", "", decisionNames("|")+" (required)")
	f.StringVar(&opts.Reason, "reason", "", "why: kept in the audit trail (required)")
	f.StringVar(&opts.ResultRef, "result-ref", "", "the provider's reference for the effect (required with --as completed)")
	f.StringVar(&opts.Result, "result", "", "JSON stored as the result (completed) or the rejection (failed)")
	f.StringVar(&opts.Evidence, "evidence", "", "what you checked; its summary and SHA-256 go into the audit trail")
	f.Int64Var(&opts.ExpectVersion, "expect-version", 0, "the version you looked at (refused if the record changed since)")
	f.DurationVar(&opts.Snooze, "snooze", 0, "with --as defer: how long until the record wants attention again")
	f.BoolVar(&opts.Force, "force", false, "decide even though the lease is live (recorded as forced)")
	f.BoolVar(&opts.Override, "override", false, "decide against the lookup's definite answer (recorded)")
	f.BoolVar(&opts.NoLookup, "no-lookup", false, "decide without the tool's outcome lookup (skip it, or confirm there is none); recorded")
	f.StringVarP(&opts.Output, "output", "o", "table", "table|json")
	addBulkFlags(cmd, &bulkOpts)
	return cmd
}

// runBulkCmd checks a bulk resolve's input, then runs it on a writer with
// a connection per decision in flight.
func runBulkCmd(cmd *cobra.Command, g *globalFlags, args []string, opts bulkOptions) error {
	f, groups, err := checkBulk(cmd, args, &opts)
	if err != nil {
		return err
	}
	in := cmd.InOrStdin()
	prompt := isTerminalIn(in)
	if !opts.Yes && !prompt {
		return usagef("nothing decided: standard input is not a terminal to confirm on; pass --yes to accept the proposed groups")
	}
	return withWriterConns(cmd, g, max(writerConns, opts.Concurrency), func(ctx context.Context, w *writer) error {
		client := bulk.HTTPClient(opts.Concurrency)
		defer client.CloseIdleConnections()
		w.desk.Client = client
		return runBulkResolve(ctx, w, bulkRun{opts: opts, filter: f, groups: groups, in: bufio.NewReader(in), prompt: prompt,
			out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()})
	})
}

// check refuses what the database would refuse anyway, before anything is
// audited: a typo is not an event.
func (o resolveOptions) check() error {
	kind, known := reconcile.KindOf(reconcile.Decision(o.As))
	switch {
	case o.As == "":
		return usagef("--as is required: %s or %s", decisionNames(", ", reconcile.Decisions[:len(reconcile.Decisions)-1]...),
			reconcile.Decisions[len(reconcile.Decisions)-1])
	case !known:
		return usagef("--as %q: one of %s", o.As, decisionNames(", "))
	case kind.NeedsUntil && checkSnooze(o.Snooze, o.As) != nil:
		return checkSnooze(o.Snooze, o.As)
	case !kind.NeedsUntil && o.Snooze != 0:
		return usagef("--snooze goes with --as %s", decisionNames(" or ", untilDecisions()...))
	case o.Result != "" && !json.Valid([]byte(o.Result)):
		return usagef("--result is not valid JSON")
	case o.ExpectVersion < 0:
		return usagef("--expect-version %d: versions start at 1", o.ExpectVersion)
	}
	return checkReason(o.Reason, "it goes into the audit trail")
}

// decisionNames joins the names of ds (of every decision, without ds)
// with sep.
func decisionNames(sep string, ds ...reconcile.Decision) string {
	if len(ds) == 0 {
		ds = reconcile.Decisions
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = string(d)
	}
	return strings.Join(names, sep)
}

// untilDecisions are the decisions that take --snooze.
func untilDecisions() []reconcile.Decision {
	var out []reconcile.Decision
	for _, k := range reconcile.Kinds {
		if k.NeedsUntil {
			out = append(out, k.Decision)
		}
	}
	return out
}

// decisionHelp is the resolve command's line for each decision, the
// names aligned.
func decisionHelp() string {
	width := 0
	for _, d := range reconcile.Decisions {
		width = max(width, len(d))
	}
	var b strings.Builder
	for _, k := range reconcile.Kinds {
		fmt.Fprintf(&b, "  %-*s %s\n", width+1, k.Decision, k.Words.Help)
	}
	return b.String()
}

func runResolve(ctx context.Context, w *writer, id int64, opts resolveOptions, out, errOut io.Writer) error {
	d, err := w.view.Get(ctx, id)
	if errors.Is(err, readmodel.ErrNotFound) {
		return fmt.Errorf("no operation %d (or not visible to this role)", id)
	}
	if err != nil {
		return err
	}
	p := reconcile.DecideParams{
		OperationID: id, Decision: reconcile.Decision(opts.As), ExpectVersion: opts.ExpectVersion,
		Reason: opts.Reason, ResultRef: opts.ResultRef, Force: opts.Force, Override: opts.Override,
	}
	if p.ExpectVersion == 0 {
		p.ExpectVersion = d.Version
	}
	if opts.Result != "" {
		p.Result = json.RawMessage(opts.Result)
	}
	ans, asked, err := gatherEvidence(ctx, w, d, opts, errOut)
	if err != nil {
		return err
	}
	p.Evidence = ans.Evidence
	if p.ResultRef == "" {
		p.ResultRef = ans.ResultRef
	}
	if opts.Evidence != "" {
		p.Evidence = withNote(p.Evidence, asked, opts.Evidence)
	}
	if k, _ := reconcile.KindOf(p.Decision); k.NeedsRef && p.ResultRef == "" {
		return usagef("--as %s needs --result-ref: the provider's reference for the effect", p.Decision)
	}
	checkContradiction(p, errOut)
	if opts.Snooze > 0 {
		p.SnoozeFor = opts.Snooze // from the decision's time, after any lookup
	}
	res, err := w.desk.Decide(ctx, d.Tool, p)
	if k, _ := reconcile.KindOf(p.Decision); err == nil && k.NeedsUntil && res.State == string(readmodel.StateStuck) {
		// The database names the lease's state; the deferral it just
		// recorded makes the record deferred, as ops show says.
		res.State = string(readmodel.StateDeferred)
	}
	return writeDecision(out, opts.Output, fmt.Sprintf("%s on %d (%s)", opts.As, id, identityText(d.Row)), res, err)
}

// gatherEvidence runs the tool's lookup and says what it answered, or
// says that no evidence was gathered and why: the summary goes into the
// audit trail either way. Deciding on an external effect of unknown
// outcome without a lookup takes an explicit --no-lookup (deferring,
// which changes nothing, does not). asked tells whether the lookup ran.
func gatherEvidence(ctx context.Context, w *writer, d readmodel.Detail, opts resolveOptions, errOut io.Writer) (ans reconcile.Answer, asked bool, err error) {
	hasLookup := w.desk.Tools[d.Tool].Lookup != nil
	switch {
	case hasLookup && !opts.NoLookup:
		ans, _ = w.desk.Ask(ctx, d.Tenant, d.Tool, d.Key)
		fmt.Fprintln(errOut, "lookup:", shown(ans.Evidence.Summary, fieldBytes, ""))
		return ans, true, nil
	case hasLookup:
		ans.Evidence.Summary = "no evidence gathered: the lookup for " + d.Tool + " was skipped (--no-lookup)"
	default:
		ans.Evidence = reconcile.NoLookupEvidence(d.Tool)
		if k, _ := reconcile.KindOf(reconcile.Decision(opts.As)); !opts.NoLookup && d.Effect == string(ops.EffectUnknownOutcome) && k.Changes() {
			return ans, false, usagef("%s on %d: %s's effect is external and its outcome unknown, and the catalog has no lookup for it, "+
				"so opsdesk can gather no evidence; check the provider by hand, then pass --no-lookup "+
				"(with --evidence 'what you checked') to decide without a lookup", opts.As, d.ID, d.Tool)
		}
	}
	fmt.Fprintln(errOut, "warning:", shown(ans.Evidence.Summary, fieldBytes, ""))
	return ans, false, nil
}

// checkContradiction says, before deciding, that the decision goes
// against the lookup. The database refuses every contradiction without
// --override (another --result-ref than the one the provider reported
// included) and audits the refusal, so nothing is refused here.
func checkContradiction(p reconcile.DecideParams, errOut io.Writer) {
	e := p.Evidence
	// The references are quoted (%q), a provider's cut first.
	ref, found := ui.Cut(p.ResultRef, cellBytes, ""), ui.Cut(e.Ref, cellBytes, "")
	switch {
	case !e.Contradicts(p.Decision, p.ResultRef):
	case e.RefContradicts(p.Decision, p.ResultRef) && !p.Override:
		fmt.Fprintf(errOut, "warning: --result-ref %q contradicts the lookup, which found reference %q: leave --result-ref out to record %q, "+
			"or pass --override to record %q against the lookup (audited)\n", ref, found, found, ref)
	case e.RefContradicts(p.Decision, p.ResultRef):
		fmt.Fprintf(errOut, "warning: --result-ref %q contradicts the lookup, which found reference %q: deciding against it (--override, recorded)\n",
			ref, found)
	case p.Override:
		fmt.Fprintf(errOut, "warning: the lookup says %s, which contradicts %s: deciding against it (--override, recorded)\n",
			strings.ReplaceAll(string(e.Lookup), "_", " "), p.Decision)
	}
}

// withNote adds what the person noted to the evidence: the summary keeps
// both, the digest covers both, the lookup's verdict and reference stay.
func withNote(e reconcile.Evidence, asked bool, note string) reconcile.Evidence {
	summary := note
	switch {
	case asked:
		summary = "lookup: " + e.Summary + "; noted: " + note
	case e.Summary != "":
		summary = e.Summary + "; noted: " + note
	}
	sum := sha256.Sum256([]byte(e.Digest + "\n" + note))
	e.Digest, e.Summary = "sha256:"+hex.EncodeToString(sum[:]), summary
	return e
}

// writeDecision reports an attempt: what it did, or why it was refused,
// and where the audit record is. A refusal is the command's error.
func writeDecision(out io.Writer, format, what string, res reconcile.Result, err error) error {
	var refused *reconcile.RefusedError
	if err != nil && !errors.As(err, &refused) {
		return err
	}
	if format == "json" {
		if jerr := writeJSON(out, res); jerr != nil {
			return jerr
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("%s %s: %s (audit record %s)", refused.Outcome, what, refused.Message, res.AuditRef())
	}
	line := "decided: " + what
	if res.State != "" {
		line += fmt.Sprintf("; now %s, version %d", res.State, res.Version)
	}
	_, werr := fmt.Fprintf(out, "%s; audit record %s\n", termtext.Clean(line), shown(res.AuditRef(), cellBytes, ""))
	return werr
}

func newConflictsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conflicts",
		Short: "Review conflicting attempts (a key reused with another intent)",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return usagef("conflicts needs a command: show or ack (see opsdesk conflicts --help)")
		},
	}
	addGlobalFlags(cmd.PersistentFlags(), g)
	var reason, output string
	ack := &cobra.Command{
		Use:     "ack ID --reason TEXT",
		Short:   "Acknowledge an operation's unreviewed conflicting attempts (audited)",
		Example: "  opsdesk conflicts ack 48213 --reason 'caller bug: reused keys across carts; fixed in v2.3'",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := checkReason(reason, "it goes into the audit trail"); err != nil {
				return err
			}
			return withWriter(cmd, g, func(ctx context.Context, w *writer) error {
				// The conflicts unreviewed now are the ones acknowledged;
				// any arriving meanwhile stay unreviewed.
				d, err := w.view.Get(ctx, id)
				if err != nil && !errors.Is(err, readmodel.ErrNotFound) {
					return err
				}
				var seen []int64
				for _, c := range d.Conflicts {
					if !c.Reviewed {
						seen = append(seen, c.ID)
					}
				}
				res, err := w.desk.AckConflicts(ctx, id, seen, reason)
				return writeDecision(cmd.OutOrStdout(), output, fmt.Sprintf("conflicts acknowledged on %d", id), res, err)
			})
		},
	}
	ack.Flags().StringVar(&reason, "reason", "", "why: kept in the audit trail (required)")
	ack.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	cmd.AddCommand(newConflictsShowCmd(g), ack)
	return cmd
}

func newRevealCmd(g *globalFlags) *cobra.Command {
	var reason, field, output string
	cmd := &cobra.Command{
		Use:   "reveal ID --reason TEXT [--field intent|result] [-o json]",
		Short: "Show an operation's stored result or intent (audited before it is shown)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			f := reconcile.Field(field)
			if f != reconcile.FieldIntent && f != reconcile.FieldResult {
				return usagef("--field %q: intent or result", field)
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := checkReason(reason, "revealing a stored value is audited"); err != nil {
				return err
			}
			return withWriter(cmd, g, func(ctx context.Context, w *writer) error {
				// The value streams from the database: one of 32 MiB is
				// never held whole, nor copied.
				out := cmd.OutOrStdout()
				var dst io.Writer = escapingWriter{out}
				var doc *revealDoc
				if output == "json" {
					if doc, err = newRevealDoc(out, id, f); err != nil {
						return err
					}
					dst = doc
				}
				// A value sealed at rest is kept whole instead, to be
				// decrypted where the context holds its key.
				sniff := &sealSniffer{dst: dst}
				res, err := w.desk.RevealTo(ctx, id, f, reason, sniff)
				if err != nil {
					if ferr := sniff.flush(); ferr != nil {
						return ferr
					}
					if doc != nil && doc.started {
						return err // cut short in the value: stdout is not whole JSON
					}
					return writeDecision(out, output, fmt.Sprintf("reveal of %d", id), res, err)
				}
				if err := sniff.flush(); err != nil {
					return err
				}
				var seal sealedReveal
				if sniff.sealed {
					seal, err = openSealed(ctx, cmd.ErrOrStderr(), w, id, f, sniff.buf)
					if _, werr := dst.Write(seal.value); werr != nil {
						return werr
					}
				}
				if doc != nil {
					if ferr := doc.finish(res, seal); ferr != nil {
						return ferr
					}
					return err
				}
				if _, werr := io.WriteString(out, "\n"); werr != nil {
					return werr
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why you need to see it: kept in the audit trail (required)")
	cmd.Flags().StringVar(&field, "field", string(reconcile.FieldResult), "result, or intent: the canonical request")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table (the value alone) or json (the value, its sealing and the audit record)")
	return cmd
}

// revealDoc writes ops reveal's -o json: an object whose "value" is the
// stored JSON as the database reads it out (streamed like the plain
// output, never held whole), followed by whether it was sealed at rest
// and the audit record of the reveal. Its start is written with the
// value's first bytes, so that a refused reveal prints the decision's
// JSON alone.
type revealDoc struct {
	out        io.Writer
	head, tail []byte // writeJSON's encoding of the start, cut at the value
	started    bool
}

// revealPlaceholder stands for the value in the encoding cut into head
// and the rest; no id or field name encodes to it.
const revealPlaceholder = `"\u0000value"`

func newRevealDoc(out io.Writer, id int64, f reconcile.Field) (*revealDoc, error) {
	var buf bytes.Buffer
	err := writeJSON(&buf, struct {
		ID    int64           `json:"id"`
		Field reconcile.Field `json:"field"`
		Value json.RawMessage `json:"value"`
	}{id, f, json.RawMessage(revealPlaceholder)})
	if err != nil {
		return nil, err
	}
	head, tail, ok := bytes.Cut(buf.Bytes(), []byte(revealPlaceholder))
	if !ok {
		return nil, errors.New("encode JSON: the value was not placed")
	}
	return &revealDoc{out: out, head: head, tail: tail}, nil
}

func (d *revealDoc) Write(p []byte) (int, error) {
	if !d.started {
		d.started = true
		if _, err := d.out.Write(d.head); err != nil {
			return 0, err
		}
	}
	return escapingWriter{d.out}.Write(p)
}

// finish ends the object: null for a value nothing was stored as, then
// the sealing and the audit record.
func (d *revealDoc) finish(res reconcile.Result, seal sealedReveal) error {
	if !d.started {
		if _, err := d.Write([]byte("null")); err != nil {
			return err
		}
	}
	var rest bytes.Buffer
	err := writeJSON(&rest, struct {
		Encrypted bool             `json:"encrypted"`
		KeyID     *string          `json:"key_id"`
		Decrypted bool             `json:"decrypted"`
		Audit     reconcile.Result `json:"audit"`
	}{seal.keyID != nil, seal.keyID, seal.decrypted, res})
	if err != nil {
		return err
	}
	// head ends inside the object, before the value; tail closes it.
	// rest's fields join them: ",\n  \"encrypted\": …" in place of "\n}\n".
	body := bytes.TrimSuffix(bytes.TrimPrefix(rest.Bytes(), []byte("{")), []byte("}\n"))
	if _, err := d.out.Write(append([]byte(","), bytes.TrimRight(body, "\n")...)); err != nil {
		return err
	}
	_, err = d.out.Write(d.tail)
	return err
}

// sealSniffer passes a revealed value through to dst unless it begins as
// a value sealed at rest (opsmodel.EncryptedKeyID), which it keeps whole in
// buf instead (a sealed value is at most the library's MaxResultBytes,
// and a third more). It writes only whole writes it was given, so each
// still ends on a character boundary.
type sealSniffer struct {
	dst     io.Writer
	buf     []byte
	decided bool
	sealed  bool
}

// sniffBytes is how much of a value the sniffer reads before it decides:
// more than an envelope's start up to the end of its key id.
const sniffBytes = 512

func (s *sealSniffer) Write(p []byte) (int, error) {
	if s.decided && !s.sealed {
		return s.dst.Write(p)
	}
	s.buf = append(s.buf, p...)
	if !s.decided && len(s.buf) >= sniffBytes {
		if err := s.decide(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (s *sealSniffer) decide() error {
	s.decided = true
	if _, s.sealed = opsmodel.EncryptedKeyID(s.buf); s.sealed {
		return nil
	}
	_, err := s.dst.Write(s.buf)
	s.buf = nil
	return err
}

// flush decides on what it has, once the value ended.
func (s *sealSniffer) flush() error {
	if s.decided || len(s.buf) == 0 {
		return nil
	}
	return s.decide()
}

// sealedReveal is a revealed value sealed at rest, as it is shown:
// decrypted, or the envelope as stored.
type sealedReveal struct {
	value     []byte
	keyID     *string // the key it is sealed under; nil: not sealed
	decrypted bool
}

// openSealed opens a revealed value sealed at rest: decrypted, where the
// context's reveal_keys hold its key id; otherwise the envelope as
// stored, saying which key id it is encrypted under (on stderr, so that
// stdout is only the value). The reveal was audited before it was
// fetched. An envelope that does not open is shown as stored, with the
// error.
func openSealed(ctx context.Context, errOut io.Writer, w *writer, id int64, f reconcile.Field, stored []byte) (sealedReveal, error) {
	kid, _ := opsmodel.EncryptedKeyID(stored)
	s := sealedReveal{value: stored, keyID: &kid}
	kr := w.cfg.Context.Keyring
	var missing error
	if kr == nil {
		missing = errors.New("this context has no reveal_keys")
	} else if _, err := kr.Key(kid); err != nil {
		missing = fmt.Errorf("this context's reveal_keys (%s) hold no key %s", w.cfg.Context.RevealKeys, strconv.Quote(kid))
	}
	if missing != nil {
		fmt.Fprintf(errOut, "encrypted under key id %s: the service sealed this %s at rest (Config.Keyring), and %v; "+
			"the envelope is shown as stored.\n", strconv.Quote(termtext.Clean(kid)), f, missing)
		return s, nil
	}
	d, err := w.view.Get(ctx, id)
	if err != nil {
		return s, err
	}
	plain, _, err := opsmodel.OpenStored(kr, string(f), ops.Identity{Tenant: d.Tenant, Tool: d.Tool, Key: d.Key}, stored)
	if err != nil {
		return s, fmt.Errorf("the stored %s is encrypted under key id %s and was not decrypted with this context's reveal_keys: %w; "+
			"the envelope is shown as stored", f, strconv.Quote(termtext.Clean(kid)), err)
	}
	s.value, s.decrypted = plain, true
	_, err = fmt.Fprintf(errOut, "decrypted locally under key id %s with this context's reveal_keys: the store keeps it encrypted.\n",
		strconv.Quote(termtext.Clean(kid)))
	return s, err
}
