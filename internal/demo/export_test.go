package demo

import (
	"fmt"

	"github.com/opsdesk/opsdesk/ops"
)

// Jobs returns the first n jobs a fleet with seed and tenants would run,
// as "scenario tenant/tool/key intent" lines.
func Jobs(seed uint64, tenants []string, n int) []string {
	p := newPlanner(seed, tenants)
	out := make([]string, n)
	for i := range out {
		j := p.next()
		out[i] = fmt.Sprintf("%s %s %+v %+v %v %d", j.scenario, j.req.Identity, j.req.Intent, j.changed, j.retry, j.pick)
	}
	return out
}

// Scenarios is how many scenarios a deck holds, and how many kinds.
func Scenarios() (deck, kinds int) {
	for _, w := range deckWeights {
		deck += w.weight
	}
	return deck, len(deckWeights)
}

// Request is the request the fleet made for an abandoned record, so a test
// can retry it as the fleet would.
func (f *Fleet) Request(id ops.Identity) (ops.Request, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.abandoned {
		if a.Identity == id {
			return a.req, true
		}
	}
	return ops.Request{}, false
}

// StoreStalled is storeStalled.
var StoreStalled = storeStalled
