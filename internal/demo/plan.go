package demo

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/opsdesk/opsdesk/ops"
)

// scenario is one kind of job the fleet runs: a request and what goes wrong
// with it.
type scenario int

const (
	scNote            scenario = iota // create-note succeeds
	scTicket                          // create-ticket succeeds
	scEmail                           // send-email succeeds
	scCharge                          // charge-card succeeds
	scDeploy                          // deploy-service succeeds
	scTicketRejected                  // a ticket for the closed queue: a stored business rejection
	scChargeDeclined                  // the provider declines the card: a stored rejection
	scDeployRejected                  // the provider refuses a release candidate in prod
	scLostAfterCommit                 // success, the answer is lost, the retry replays
	scDoubleSubmit                    // the same ticket submitted twice at once: one runs, one replays
	scConflict                        // a key reused with a different intent
	scEmailLost                       // the mail provider sent, the answer was lost: the retry takes over, the provider replays
	scEmailTimeout                    // send-email timed out before the provider acted: the retry takes over and sends
	scEmailCrash                      // the worker crashed after the provider sent: its restart takes over
	scLostResponse                    // the provider acted, the answer was lost: stuck, the lookup finds it
	scTimeoutBefore                   // timed out before the provider acted: stuck, the lookup finds nothing
	scCrashAfter                      // the worker crashed after the provider succeeded: stuck, found
	scCrashBefore                     // the worker crashed before calling the provider: stuck, not found
	scUnavailable                     // the provider refused before acting: released (sometimes retried)
	scSlow                            // a slow provider call: the lease is renewed and stays live
	scRetryStuck                      // a retry of an abandoned record: in progress or needs reconciliation
)

var scenarioNames = [...]string{
	scNote: "note", scTicket: "ticket", scEmail: "email", scCharge: "charge", scDeploy: "deploy",
	scTicketRejected: "ticket-rejected", scChargeDeclined: "charge-declined", scDeployRejected: "deploy-rejected",
	scLostAfterCommit: "lost-after-commit", scDoubleSubmit: "double-submit", scConflict: "conflict",
	scEmailLost: "email-lost-response", scEmailTimeout: "email-timeout", scEmailCrash: "email-crash",
	scLostResponse: "lost-response", scTimeoutBefore: "timeout-before-acting",
	scCrashAfter: "crash-after-provider", scCrashBefore: "crash-before-provider",
	scUnavailable: "provider-unavailable", scSlow: "slow-call", scRetryStuck: "retry-stuck",
}

func (s scenario) String() string { return scenarioNames[s] }

// deckWeights is how many times each scenario appears in a deck. Every
// scenario is in every deck, so each state keeps appearing however the
// deck is shuffled; successes dominate, as they do in production.
var deckWeights = []struct {
	sc     scenario
	weight int
}{
	{scNote, 4}, {scTicket, 4}, {scEmail, 4}, {scCharge, 3}, {scDeploy, 3},
	{scTicketRejected, 2}, {scChargeDeclined, 1}, {scDeployRejected, 1},
	{scLostAfterCommit, 3}, {scDoubleSubmit, 1}, {scConflict, 2},
	{scEmailLost, 1}, {scEmailTimeout, 1}, {scEmailCrash, 1},
	{scLostResponse, 1}, {scTimeoutBefore, 1}, {scCrashAfter, 1}, {scCrashBefore, 1},
	{scUnavailable, 2}, {scSlow, 2}, {scRetryStuck, 1},
}

// job is one unit of the fleet's work, fully decided by the planner.
type job struct {
	seq      int
	scenario scenario
	req      ops.Request
	// changed is the intent of a retry that reuses the key wrongly
	// (scConflict; sometimes scCrashAfter), nil otherwise.
	changed any
	// retry says a released record is retried (scUnavailable).
	retry bool
	// pick chooses the abandoned record to retry (scRetryStuck).
	pick uint64
}

// planner draws the fleet's jobs. Everything random about the fleet comes
// from its seeded generator, so a seed replays the same sequence of jobs;
// only which worker runs which job, and when, is left to the scheduler.
type planner struct {
	rng     *rand.Rand
	tenants []string
	deck    []scenario
	seq     int
}

func newPlanner(seed uint64, tenants []string) *planner {
	return &planner{rng: rand.New(rand.NewPCG(seed, 0x6f70736465736b)), tenants: tenants}
}

func (p *planner) next() job {
	if len(p.deck) == 0 {
		for _, w := range deckWeights {
			for range w.weight {
				p.deck = append(p.deck, w.sc)
			}
		}
		p.rng.Shuffle(len(p.deck), func(i, j int) { p.deck[i], p.deck[j] = p.deck[j], p.deck[i] })
	}
	sc := p.deck[len(p.deck)-1]
	p.deck = p.deck[:len(p.deck)-1]
	p.seq++
	j := job{seq: p.seq, scenario: sc}
	tenant := p.tenants[p.rng.IntN(len(p.tenants))]

	tool := ""
	variant := variantOK
	switch sc {
	case scNote:
		tool = ToolCreateNote
	case scTicket, scDoubleSubmit:
		tool = ToolCreateTicket
	case scEmail, scEmailLost, scEmailTimeout, scEmailCrash:
		tool = ToolSendEmail
	case scCharge:
		tool = ToolChargeCard
	case scDeploy:
		tool = ToolDeployService
	case scTicketRejected:
		tool, variant = ToolCreateTicket, variantRejected
	case scChargeDeclined:
		tool, variant = ToolChargeCard, variantRejected
	case scDeployRejected:
		tool, variant = ToolDeployService, variantRejected
	case scLostAfterCommit:
		tool = p.pick(ToolCreateNote, ToolCreateTicket, ToolSendEmail, ToolChargeCard, ToolDeployService)
	case scConflict:
		tool = p.pick(ToolCreateNote, ToolCreateTicket, ToolSendEmail, ToolChargeCard)
	case scLostResponse, scTimeoutBefore, scCrashAfter, scCrashBefore:
		tool = p.pick(ToolChargeCard, ToolDeployService)
	case scUnavailable, scSlow:
		tool = p.pick(ToolSendEmail, ToolChargeCard, ToolDeployService)
	case scRetryStuck:
		j.pick = p.rng.Uint64()
		return j
	}
	j.req = ops.Request{
		Identity: ops.Identity{Tenant: tenant, Tool: tool, Key: keyFor(tool, j.seq)},
		Version:  toolVersion,
		Intent:   p.intent(tool, tenant, j.seq, variant),
	}
	switch {
	case sc == scConflict, sc == scCrashAfter && p.rng.IntN(3) == 0:
		j.changed = changed(j.req.Intent)
	case sc == scUnavailable:
		j.retry = p.rng.IntN(2) == 0
	}
	return j
}

func (p *planner) pick(tools ...string) string { return tools[p.rng.IntN(len(tools))] }

// keyFor is the idempotency key of job seq's call of tool, in the style of
// the agent runs and orders callers derive keys from.
func keyFor(tool string, seq int) string {
	switch tool {
	case ToolCreateNote:
		return fmt.Sprintf("run-%05d:note", seq)
	case ToolCreateTicket:
		return fmt.Sprintf("run-%05d:ticket", seq)
	case ToolSendEmail:
		return fmt.Sprintf("run-%05d:notify", seq)
	case ToolChargeCard:
		return fmt.Sprintf("order-%05d:charge", seq)
	}
	return fmt.Sprintf("release-%05d:deploy", seq)
}

// Intent variants.
const (
	variantOK       = iota
	variantRejected // refused by the business or the provider
)

var (
	noteTitles    = []string{"Disk pressure on db-2", "Customer asked for a callback", "Rotated the API key", "Backup verified"}
	ticketTitles  = []string{"Printer on fire", "Login page slow", "Refund not received", "VPN drops every hour"}
	ticketQueues  = []string{"ops", "billing", "support"}
	emailSubjects = []string{"Your order has shipped", "Incident resolved", "Weekly report", "Password reset"}
	services      = []string{"api", "billing", "search", "web"}
)

func (p *planner) intent(tool, tenant string, seq, variant int) any {
	switch tool {
	case ToolCreateNote:
		return noteIntent{Title: p.one(noteTitles), Body: fmt.Sprintf("Written by run %d.", seq)}
	case ToolCreateTicket:
		in := ticketIntent{Title: p.one(ticketTitles), Queue: p.one(ticketQueues), Priority: 1 + p.rng.IntN(4)}
		if variant == variantRejected {
			in.Queue = closedQueue
		}
		return in
	case ToolSendEmail:
		return emailIntent{To: "oncall@" + tenant + ".example", Subject: p.one(emailSubjects)}
	case ToolChargeCard:
		in := chargeIntent{Order: fmt.Sprintf("order-%05d", seq), AmountCents: int64(500 + 100*p.rng.IntN(200)), Currency: "EUR", Card: "tok_visa"}
		if variant == variantRejected {
			in.Card = declinedCard
		}
		return in
	}
	in := deployIntent{Service: p.one(services), Version: fmt.Sprintf("v1.%d.%d", p.rng.IntN(20), p.rng.IntN(10)),
		Environment: p.one([]string{"staging", "prod"})}
	if variant == variantRejected {
		in.Version, in.Environment = in.Version+"-rc1", "prod"
	}
	return in
}

// changed is in with one field changed: what a caller bug sends under a
// key it already used.
func changed(in any) any {
	switch in := in.(type) {
	case noteIntent:
		in.Body += " (edited)"
		return in
	case ticketIntent:
		in.Priority = in.Priority%4 + 1
		return in
	case emailIntent:
		in.To = strings.Replace(in.To, "oncall@", "support@", 1)
		return in
	case chargeIntent:
		in.AmountCents += 100
		return in
	case deployIntent:
		in.Version += "-hotfix"
		return in
	}
	panic(fmt.Sprintf("demo: no way to change intent %T", in))
}

func (p *planner) one(s []string) string { return s[p.rng.IntN(len(s))] }

// interval is the time between jobs at rate jobs per second.
func interval(rate float64) time.Duration { return time.Duration(float64(time.Second) / rate) }
