-- The overview's counts stop at 1,001 records and estimate beyond
-- (internal/storeview countCapped), so that they cost the same over ten
-- million records as over one.

-- +goose Up
-- Unreviewed conflicts, by the identity they conflict with: the overview
-- counts the records with unreviewed conflicts from this index (an
-- index-only scan that stops at 1,001 identities), and every list row's
-- conflicted flag probes it. Reviewing a conflict removes it from it.
CREATE INDEX conflicts_unreviewed_idx ON opsdesk.conflicts (tenant, tool, key)
    WHERE reviewed_at IS NULL;

-- The leases of pending records, for estimating how many are live and how
-- many stuck. The planner would otherwise multiply the share of pending
-- records by the share of all leases (most of them completed records' old
-- leases) that expired: far off. ANALYZE keeps a histogram of this
-- expression, and the estimate plans a query on the same expression.
CREATE STATISTICS opsdesk.operations_pending_lease_stats
    ON ((CASE WHEN state = 'pending' THEN lease_expires_at END)) FROM opsdesk.operations;
