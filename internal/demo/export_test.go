package demo

import "fmt"

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
