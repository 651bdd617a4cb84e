package opsmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsdesk/opsdesk/ops"
)

// Config configures one tool.
type Config struct {
	// Tenant names the caller's tenant from the session's authentication
	// (req.Extra.TokenInfo, or what the server attached to req.Session),
	// never from the arguments. Required. Its error is answered as a
	// ClassTenantInvalid tool error with a generic message: its text is
	// never sent.
	Tenant func(ctx context.Context, req *mcp.CallToolRequest) (string, error)
	// Version is the tool's intent version, part of the fingerprint
	// (default "1"): a new version whose canonical intent differs is a
	// conflict, not a replay.
	Version string
	// KeyOptional lets a call without a key run, under a key of its own
	// ("unkeyed-" and 32 hex digits, in the result's _meta as KeyMeta):
	// it is recorded like any other, but a retry without that key runs
	// again. Off by default: a call without a key is refused with a
	// ClassKeyMissing tool error. Such a tool is not idempotentHint.
	KeyOptional bool
	// Additive says the tool only adds things (creates a ticket), never
	// changes or deletes them: the tool's destructiveHint is its negation.
	Additive bool
}

// LocalFunc is a tool whose effect is writes in tx, the record's
// transaction (ops.DoTx): they commit with the record or not at all.
// Return ops.Reject(payload) for a business rejection (stored, replayed).
type LocalFunc[In, Out any] func(ctx context.Context, req *mcp.CallToolRequest, tx pgx.Tx, in In) (Out, error)

// ExternalFunc is a tool whose effect is outside the store (ops.DoExternal):
// send a.ProviderKey() to the provider as its idempotency key. Return
// ops.NotApplied(err) when the provider certainly did not act,
// ops.Reject(payload) for a business rejection, and any other error when
// the outcome is unknown (the record stays pending).
type ExternalFunc[In, Out any] func(ctx context.Context, req *mcp.CallToolRequest, a ops.Attempt, in In) (Out, error)

// AddLocalTool adds t to server, running fn through ops.DoTx under t.Name,
// which must be a tool of store with EffectLocal. t's input schema (by
// default derived from In) must refuse additional properties; its output
// schema is derived from Out unless set. Its annotations are set to agree
// with the policy (see AddExternalTool).
func AddLocalTool[In, Out any](server *mcp.Server, store *ops.Store, t *mcp.Tool, opts Config, fn LocalFunc[In, Out]) error {
	return add[In, Out](server, store, t, opts, false, func(ctx context.Context, req *mcp.CallToolRequest, r ops.Request, in In) (ops.Reply[answer], error) {
		return ops.DoTx(ctx, store, r, func(ctx context.Context, tx pgx.Tx) (answer, error) {
			out, err := fn(ctx, req, tx, in)
			if err != nil {
				return answer{}, err
			}
			return newAnswer(out)
		})
	})
}

// AddExternalTool adds t to server, running fn through ops.DoExternal
// under t.Name, which must be a tool of store with an external effect.
//
// The annotations agree with the policy: readOnlyHint false,
// idempotentHint true unless KeyOptional (a repeat under the same key has
// no further effect), openWorldHint true for external effects and false for
// local ones, destructiveHint false only when Additive. A tool whose
// annotations say it is read-only is refused: it needs no record.
func AddExternalTool[In, Out any](server *mcp.Server, store *ops.Store, t *mcp.Tool, opts Config, fn ExternalFunc[In, Out]) error {
	return add[In, Out](server, store, t, opts, true, func(ctx context.Context, req *mcp.CallToolRequest, r ops.Request, in In) (ops.Reply[answer], error) {
		return ops.DoExternal(ctx, store, r, func(ctx context.Context, a ops.Attempt) (answer, error) {
			out, err := fn(ctx, req, a, in)
			if err != nil {
				return answer{}, err
			}
			return newAnswer(out)
		})
	})
}

type runFunc[In any] func(ctx context.Context, req *mcp.CallToolRequest, r ops.Request, in In) (ops.Reply[answer], error)

func add[In, Out any](server *mcp.Server, store *ops.Store, t *mcp.Tool, opts Config, external bool, run runFunc[In]) error {
	if t == nil || store == nil || server == nil {
		return errors.New("opsmcp: a server, a store and a tool are required")
	}
	if opts.Tenant == nil {
		return fmt.Errorf("opsmcp: tool %q: Config.Tenant is required", t.Name)
	}
	policy, ok := store.Policy(t.Name)
	if !ok {
		return fmt.Errorf("opsmcp: tool %q: the store has no policy for it (ops.Config.Tools)", t.Name)
	}
	if (policy.Effect == ops.EffectLocal) == external {
		return fmt.Errorf("opsmcp: tool %q has effect %s: use %s", t.Name, policy.Effect,
			map[bool]string{true: "AddLocalTool", false: "AddExternalTool"}[policy.Effect == ops.EffectLocal])
	}
	if t.Annotations != nil && t.Annotations.ReadOnlyHint {
		return fmt.Errorf("opsmcp: tool %q is annotated read-only: it needs no record", t.Name)
	}
	tt := *t
	if tt.InputSchema == nil {
		s, err := jsonschema.For[In](nil)
		if err != nil {
			return fmt.Errorf("opsmcp: tool %q: input schema: %w", t.Name, err)
		}
		tt.InputSchema = s
	}
	if err := refusesUnknown(tt.InputSchema); err != nil {
		return fmt.Errorf("opsmcp: tool %q: %w", t.Name, err)
	}
	if tt.OutputSchema == nil && reflect.TypeFor[Out]() != reflect.TypeFor[any]() {
		s, err := jsonschema.For[Out](nil)
		if err != nil {
			return fmt.Errorf("opsmcp: tool %q: output schema: %w", t.Name, err)
		}
		tt.OutputSchema = s
	}
	tt.Annotations = annotations(t.Annotations, policy.Effect, opts)
	version := opts.Version
	if version == "" {
		version = "1"
	}
	// The SDK validates the arguments against the input schema and
	// decodes them into In; a nil output goes through untouched, which
	// is how tool errors keep their structured content.
	mcp.AddTool(server, &tt, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		key, refusal := keyOf(req.Params.Meta, opts.KeyOptional)
		if refusal != nil {
			return refusal.result(""), nil, nil
		}
		if err := strictIntent[In](req.Params.Arguments, in); err != nil {
			return (&ToolError{Class: ClassInvalidRequest, Message: err.Error() + "; nothing ran"}).result(key), nil, nil
		}
		tenant, err := opts.Tenant(ctx, req)
		if err != nil || tenant == "" {
			return (&ToolError{Class: ClassTenantInvalid, Message: "the session's authentication names no tenant this server accepts; nothing ran"}).result(key), nil, nil
		}
		r := ops.Request{Identity: ops.Identity{Tenant: tenant, Tool: t.Name, Key: key}, Version: version, Intent: in}
		out, err := run(ctx, req, r, in)
		if err != nil {
			te := toolError(err, policy.Effect)
			if te == nil { // fn's own error: DoTx rolled it back
				te = &ToolError{Class: ClassError, RetryWithSameKey: !external, Message: err.Error()}
			}
			if te.OperationID == 0 {
				te.OperationID = out.OperationID
			}
			return te.result(key), nil, nil
		}
		res := &mcp.CallToolResult{Meta: mcp.Meta{
			KeyMeta:       key,
			ReplayedMeta:  out.Disposition == ops.Replayed,
			OperationMeta: map[string]any{"id": out.OperationID, "attempt": out.Attempt},
		}}
		return res, out.Result.raw, nil
	})
	return nil
}

// refusesUnknown checks that an input schema refuses properties it does
// not name: the intent is the decoded input, and a field dropped by
// decoding would be missing from the fingerprint without anyone knowing.
func refusesUnknown(schema any) error {
	var s jsonschema.Schema
	b, err := json.Marshal(schema)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		return fmt.Errorf("input schema: %w", err)
	}
	if ap := s.AdditionalProperties; ap == nil || ap.Not == nil {
		return errors.New(`input schema must refuse unknown properties ("additionalProperties": false)`)
	}
	return nil
}

// strictIntent refuses arguments with a field In does not have, at any
// depth, and runs In's Validate: before anything is fingerprinted.
func strictIntent[In any](raw json.RawMessage, in In) error {
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var v In
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("arguments: %v", err)
		}
	}
	var err error
	if v, ok := any(&in).(ops.Validator); ok {
		err = v.Validate()
	} else if v, ok := any(in).(ops.Validator); ok {
		err = v.Validate()
	}
	if err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	return nil
}

func annotations(given *mcp.ToolAnnotations, effect ops.Effect, opts Config) *mcp.ToolAnnotations {
	a := mcp.ToolAnnotations{}
	if given != nil {
		a = *given
	}
	a.ReadOnlyHint = false
	a.IdempotentHint = !opts.KeyOptional
	destructive, open := !opts.Additive, effect != ops.EffectLocal
	a.DestructiveHint, a.OpenWorldHint = &destructive, &open
	return &a
}

// answer is a tool's output as stored: its JSON, replayed byte for byte,
// and its reference when Out is an ops.ResultReferencer.
type answer struct {
	raw json.RawMessage
	ref string
}

func newAnswer[Out any](out Out) (answer, error) {
	raw, err := json.Marshal(out)
	if err != nil {
		return answer{}, fmt.Errorf("encode the tool's output: %w", err)
	}
	a := answer{raw: raw}
	if r, ok := any(out).(ops.ResultReferencer); ok {
		a.ref = r.ResultRef()
	}
	return a, nil
}

func (a answer) MarshalJSON() ([]byte, error) { return a.raw, nil }

func (a *answer) UnmarshalJSON(b []byte) error {
	a.raw = append(json.RawMessage(nil), b...)
	return nil
}

// ResultRef is the output's reference, for the record's result_ref.
func (a answer) ResultRef() string { return a.ref }
