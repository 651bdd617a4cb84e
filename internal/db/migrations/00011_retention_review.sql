-- The retention review's figures, per tool, without a scan that grows with
-- the table (internal/storeview Review):
--
-- * completed records by tenant, tool and expiry: how many expire within
--   24 hours and 7 days and how many have expired, each a range per tenant
--   the role sees, read index-only (held to leave held records out). A
--   viewer of one tenant reads that tenant's entries only;
-- * the tool in the pending lease index: a tool's longest-stuck record and
--   its records stuck for longer than its retention, from the pending
--   entries alone;
-- * held records by tool, which no library write ever adds to.

-- +goose Up
CREATE INDEX operations_tool_expiry_idx ON opsdesk.operations (tenant, tool, expires_at) INCLUDE (held)
    WHERE state = 'completed';

DROP INDEX opsdesk.operations_pending_lease_idx;
CREATE INDEX operations_pending_lease_idx ON opsdesk.operations (lease_expires_at) INCLUDE (tenant, tool)
    WHERE state = 'pending';

CREATE INDEX operations_held_idx ON opsdesk.operations (tool) INCLUDE (tenant) WHERE held;

