-- Pending records by tenant (issue 20 §2–3).
--
-- operations_pending_lease_idx orders every tenant's pending records by
-- lease: the queue of a role that sees every tenant. A role that sees
-- some tenants walked it too and let row-level security drop the other
-- tenants' entries, so its reads grew with the whole store rather than
-- with its tenants: at 10M records a one-tenant viewer's scrape read
-- 8,889 of 8,979 live entries for nothing, once a tool (2.5× the 1M
-- figure). This index holds the same records by tenant and tool, for the
-- reads that name their groups (internal/storeview Signals for a role
-- that sees some tenants). It takes an entry for each reservation (a
-- pending insert), none for a completed insert (DoTx's create).

-- +goose Up
CREATE INDEX operations_pending_tenant_idx ON opsdesk.operations (tenant, tool, lease_expires_at)
    WHERE state = 'pending';

