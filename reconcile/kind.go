package reconcile

import (
	"github.com/opsdesk/opsdesk/internal/readmodel"
)

// Kind is everything opsdesk knows about one decision, in one place: the
// console's choices and keys, the resolve command's accepted values and
// help, bulk runs and the evidence checks all read Kinds, so adding a
// decision is a row here (and the database's opsdesk.decide, which
// enforces the same needs; reconcile/desk's tests hold the two equal).
type Kind struct {
	// Decision is its name, the value opsdesk.decide takes.
	Decision Decision
	// To is the state the record goes to; "" when the record stays as it
	// is (and deciding over a live lease then needs no force).
	To readmodel.State
	// NeedsRef: the provider's result reference (DecideParams.ResultRef)
	// is required, and a found lookup's other reference contradicts it.
	NeedsRef bool
	// NeedsUntil: a snooze time (DecideParams.SnoozeUntil) is required.
	NeedsUntil bool
	// ContradictedBy is the lookup answer it goes against, so that
	// deciding it needs an explicit override; LookupNone for none.
	ContradictedBy Lookup
	// Risk is what a wrong decision of this kind costs.
	Risk Risk
	// Words are its wording for the operator.
	Words Words
}

// Risk is what a wrong decision costs.
type Risk int

// Risks.
const (
	// RiskNone: nothing changes, so nothing goes wrong.
	RiskNone Risk = iota
	// RiskFinal: retries never run the effect again, so a wrong decision
	// leaves an effect undone, or replays a reference nobody has.
	RiskFinal
	// RiskRepeat: the next retry runs the effect again, so if it did
	// happen it happens twice; the console asks for the operation's id
	// when the lookup does not back the decision.
	RiskRepeat
)

// Words are a decision's wording, one field per place that shows it.
type Words struct {
	// Name is its name in words ("not executed"), in titles and
	// headings.
	Name string
	// Gist says in a line what it means, beside the console's choice.
	Gist string
	// Help is its line in the resolve command's help.
	Help string
	// Retries says what the retries after it do, where that does not
	// depend on the record ("" where the console words it from the
	// record).
	Retries string
	// Done is what the console says it did.
	Done string
	// Group says what accepting a bulk group proposing it does to each
	// record (bulk.Verdict.ProposalText), and Each the same at length,
	// on the console's bulk screens; "" for a decision bulk never
	// proposes.
	Group, Each string
}

// Kinds are the decisions, in the order people are offered them (the
// console's keys 1, 2, …).
var Kinds = []Kind{
	{Decision: Completed, To: readmodel.StateCompleted, NeedsRef: true, ContradictedBy: LookupNotFound, Risk: RiskFinal,
		Words: Words{
			Name:  "completed",
			Gist:  "the effect happened: retries replay its result reference",
			Help:  "the effect happened: retries replay --result-ref (and --result)",
			Done:  "confirmed completed",
			Group: "completed, with the provider's reference",
			Each: "completed, each with the reference the provider named for it (shown as ref); retries of each key " +
				"replay it",
		}},
	{Decision: NotExecuted, To: readmodel.StateReleased, ContradictedBy: LookupFound, Risk: RiskRepeat,
		Words: Words{
			Name:  "not executed",
			Gist:  "it did not happen: release it; the next retry executes again",
			Help:  "it did not happen: the record is released and the next retry executes again",
			Done:  "confirmed not executed: released",
			Group: "not executed: released, the next retry runs it again",
			Each:  "not executed: each record is released, and the next retry of its key calls the provider again",
		}},
	{Decision: Failed, To: readmodel.StateRejected, ContradictedBy: LookupFound, Risk: RiskFinal,
		Words: Words{
			Name:    "failed",
			Gist:    "it failed for good: retries get the rejection",
			Help:    "it failed for good: retries get the rejection (--result, optional)",
			Retries: "Retries get the rejection: the effect does not run again.",
			Done:    "marked failed",
		}},
	{Decision: Defer, NeedsUntil: true, Risk: RiskNone,
		Words: Words{
			Name: "defer",
			Gist: "not decidable yet: a note and a reminder, nothing changes",
			Help: "not decidable yet: note the reason and --snooze, change nothing",
			Done: "deferred",
		}},
}

// Decisions lists the decisions in the order people are offered them:
// Kinds' names.
var Decisions = func() []Decision {
	out := make([]Decision, len(Kinds))
	for i, k := range Kinds {
		out[i] = k.Decision
	}
	return out
}()

// KindOf is d's row in Kinds; false for a decision opsdesk does not know.
func KindOf(d Decision) (Kind, bool) {
	for _, k := range Kinds {
		if k.Decision == d {
			return k, true
		}
	}
	return Kind{}, false
}

// Changes tells whether the decision changes the record (and so needs
// force over a live lease).
func (k Kind) Changes() bool { return k.To != "" }
