package reconcile

import (
	"time"
)

// Tool is what a person needs to know about a tool to decide on its
// records: how to ask its provider, what the runbook says, and how long a
// decided record is kept.
type Tool struct {
	Lookup    *LookupSpec // nil: the provider cannot be asked
	Runbook   string
	Retention time.Duration
}

// Capabilities are what the connected role may do: the database decides,
// the console only stops offering what would be refused.
type Capabilities struct {
	Role   string `json:"role"`
	Decide bool   `json:"decide"` // decisions, acknowledgements, reveals
	Grant  bool   `json:"grant"`  // access grants, legal holds
	Purge  bool   `json:"purge"`  // retention purges: an admin of every tenant
}
