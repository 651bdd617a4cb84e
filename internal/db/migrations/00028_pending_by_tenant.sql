-- Pending records by tenant (issue 20 §2–3).
--
-- operations_pending_lease_idx orders every tenant's pending records by
-- lease: the queue of a role that sees every tenant. A role that sees
-- some tenants walked it too and let row-level security drop the other
-- tenants' entries, so its reads grew with the whole store rather than
-- with its tenants: at 10M records a one-tenant viewer's scrape read
-- 8,889 of 8,979 live entries for nothing, once a tool (2.5× the 1M
-- figure), and its first stuck page 2.5×. This index holds the same
-- records led by tenant, for the reads that name their tenants. It takes
-- an entry for each reservation (a pending insert), not for a completed
-- insert (DoTx's create).

-- +goose Up
CREATE INDEX operations_pending_tenant_idx ON opsdesk.operations (tenant, lease_expires_at) INCLUDE (tool)
    WHERE state = 'pending';

