// Package demo gives a newcomer a living operation store to look at: a
// simulated fleet of workers runs everyday agent tools through the real ops
// library against a simulated external provider, with faults injected so
// that every state of the state machine appears and keeps appearing.
//
// The provider ([Provider]) is an HTTP server on 127.0.0.1 whose action
// endpoints answer by the IETF Idempotency-Key draft (ops/idemhttp over an
// operation store of its own) and which answers outcome lookups by key, so
// that the truth behind every stuck record can be found out the way an
// operator would.
// The fleet ([Fleet]) is a few goroutines, each with its own ops.Store and
// owner, drawing seeded jobs at a steady rate.
package demo

import (
	"fmt"
	"time"

	"github.com/opsdesk/opsdesk/ops"
)

// The demo's tools: names as they appear in records and in the catalog.
const (
	ToolCreateNote    = "create-note"
	ToolCreateTicket  = "create-ticket"
	ToolSendEmail     = "send-email"
	ToolChargeCard    = "charge-card"
	ToolDeployService = "deploy-service"
)

// DefaultLease is the lease of the demo's tools: short, so that abandoned
// records turn stuck within seconds.
const DefaultLease = 3 * time.Second

// toolVersion is every demo tool's version.
const toolVersion = "1"

// toolSpec is what the demo knows of a tool: its effect, its retention
// policy (zero: the library's defaults), and the runbook an operator reads
// when one of its records is stuck.
type toolSpec struct {
	name        string
	effect      ops.Effect
	retention   time.Duration
	retryWindow time.Duration
	afterExpiry ops.AfterExpiry
	runbook     string
}

// tools lists the demo's tools in the order the catalog shows them.
var tools = []toolSpec{
	{
		name:   ToolCreateNote,
		effect: ops.EffectLocal,
		// Notes expire within minutes, so the retention review has records
		// to purge; their retry window is longer than that, which the
		// review warns about, and a late retry is refused (ErrExpired).
		retention:   3 * time.Minute,
		retryWindow: 10 * time.Minute,
		afterExpiry: ops.RejectAfterExpiry,
		runbook: "Writes a note to demo.notes in the same transaction as its record: a retry either\n" +
			"replays the stored note or writes it once. A record of this tool is never stuck.",
	},
	{
		name:   ToolCreateTicket,
		effect: ops.EffectLocal,
		runbook: "Opens a ticket in demo.tickets in the same transaction as its record. Tickets for\n" +
			"the closed queue \"legacy\" are rejected; the rejection is stored and replayed.",
	},
	{
		name:   ToolSendEmail,
		effect: ops.EffectIdempotentProvider,
		runbook: "The mail provider deduplicates by the operation's key, so an abandoned attempt is\n" +
			"taken over by the next retry with the same key and no second email is sent. A stuck\n" +
			"record here only means nobody retried yet; the lookup shows whether it was sent.",
	},
	{
		name:   ToolChargeCard,
		effect: ops.EffectUnknownOutcome,
		runbook: "The card may have been charged even though the worker never saw the answer.\n" +
			"Run the lookup first. Found: confirm completed with the provider's reference (CH-...).\n" +
			"Not found: confirm not executed; the next retry charges again. Never charge by hand.",
	},
	{
		name:   ToolDeployService,
		effect: ops.EffectUnknownOutcome,
		runbook: "The deployment may have started even though the worker never saw the answer.\n" +
			"Run the lookup first. Found: confirm completed with the deployment id (DEP-...).\n" +
			"Not found: confirm not executed; the next retry deploys again.",
	},
}

// Policies returns the ops policy of every demo tool, with lease (0:
// DefaultLease) for each.
func Policies(lease time.Duration) map[string]ops.Policy {
	if lease <= 0 {
		lease = DefaultLease
	}
	out := make(map[string]ops.Policy, len(tools))
	for _, t := range tools {
		out[t.name] = ops.Policy{Effect: t.effect, Lease: lease, Retention: t.retention, RetryWindow: t.retryWindow, AfterExpiry: t.afterExpiry}
	}
	return out
}

// Schema creates the business tables the local tools write to and lets the
// service role use them. It runs as the database's owner, after the
// operation store's migration (which creates opsdesk_service).
const Schema = `
CREATE SCHEMA IF NOT EXISTS demo;
CREATE TABLE IF NOT EXISTS demo.notes (
    tenant     text        NOT NULL,
    id         bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    title      text        NOT NULL,
    body       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);
CREATE TABLE IF NOT EXISTS demo.tickets (
    tenant     text        NOT NULL,
    id         bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    title      text        NOT NULL,
    queue      text        NOT NULL,
    priority   integer     NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);
GRANT USAGE ON SCHEMA demo TO opsdesk_service;
GRANT SELECT, INSERT ON demo.notes, demo.tickets TO opsdesk_service;`

// The intents of the demo's tools.
type (
	noteIntent struct {
		Title string `json:"title"`
		Body  string `json:"body"`
	}
	ticketIntent struct {
		Title    string `json:"title"`
		Queue    string `json:"queue"`
		Priority int    `json:"priority"`
	}
	emailIntent struct {
		To      string `json:"to"`
		Subject string `json:"subject"`
	}
	chargeIntent struct {
		Order       string `json:"order"`
		AmountCents int64  `json:"amount_cents"`
		Currency    string `json:"currency"`
		Card        string `json:"card"`
	}
	deployIntent struct {
		Service     string `json:"service"`
		Version     string `json:"version"`
		Environment string `json:"environment"`
	}
)

// The results the tools store.
type (
	noteResult struct {
		NoteID int64 `json:"note_id"`
	}
	ticketResult struct {
		TicketID int64 `json:"ticket_id"`
	}
	// providerResult is the provider's reference for an external effect.
	providerResult struct {
		Ref string `json:"ref"`
	}
)

func (r noteResult) ResultRef() string     { return fmt.Sprintf("N-%d", r.NoteID) }
func (r ticketResult) ResultRef() string   { return fmt.Sprintf("T-%d", r.TicketID) }
func (r providerResult) ResultRef() string { return r.Ref }

// rejection is the payload of a business rejection, stored and replayed.
type rejection struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// closedQueue is the ticket queue that rejects every ticket.
const closedQueue = "legacy"
