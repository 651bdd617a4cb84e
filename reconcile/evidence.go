package reconcile

// Contradicts tells whether deciding d, with result reference ref when
// confirming completed, goes against the lookup's definite answer, so
// that it needs an explicit override: releasing or failing what the
// provider has, confirming what it has not, or confirming it under
// another reference than the one the provider reported (retries would
// replay a reference the provider does not know). Kinds say which answer
// goes against which decision (Kind.ContradictedBy, Kind.NeedsRef).
func (e Evidence) Contradicts(d Decision, ref string) bool {
	k, _ := KindOf(d)
	return e.Lookup != LookupNone && k.ContradictedBy == e.Lookup || e.RefContradicts(d, ref)
}

// RefContradicts tells whether confirming with ref a decision that needs
// one (completed) goes against the reference the lookup found.
func (e Evidence) RefContradicts(d Decision, ref string) bool {
	k, _ := KindOf(d)
	return e.Lookup == LookupFound && k.NeedsRef && e.Ref != "" && ref != e.Ref
}

// NoLookupEvidence is the evidence of a decision on a tool whose catalog
// entry has no lookup (or that the catalog does not know): nothing was
// gathered, and the audit trail says so rather than nothing.
func NoLookupEvidence(tool string) Evidence {
	return Evidence{Summary: "no evidence gathered: the catalog has no lookup for " + tool}
}
