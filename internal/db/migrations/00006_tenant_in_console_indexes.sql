-- People's queries carry the tenant policies of row-level security, which
-- read each row's tenant. The console's partial indexes did not hold it,
-- so every entry an overview count or a lease-ordered list read cost a
-- heap fetch: a viewer of one tenant of twenty waited 440 ms for the
-- overview over ten million records (internal/storeview
-- BenchmarkConsoleQueries, TenantViewer/Overview). With the tenant in the
-- index the policies are checked in index-only scans.

-- +goose Up
DROP INDEX opsdesk.operations_pending_lease_idx;
CREATE INDEX operations_pending_lease_idx ON opsdesk.operations (lease_expires_at) INCLUDE (tenant)
    WHERE state = 'pending';

DROP INDEX opsdesk.operations_rejected_idx;
CREATE INDEX operations_rejected_idx ON opsdesk.operations (id) INCLUDE (tenant)
    WHERE state = 'completed' AND outcome = 'rejected';

DROP INDEX opsdesk.operations_released_idx;
CREATE INDEX operations_released_idx ON opsdesk.operations (id) INCLUDE (tenant)
    WHERE state = 'released';

DROP INDEX opsdesk.operations_conflicted_idx;
CREATE INDEX operations_conflicted_idx ON opsdesk.operations (id) INCLUDE (tenant)
    WHERE conflict_count > 0;

DROP INDEX opsdesk.operations_retention_idx;
CREATE INDEX operations_retention_idx ON opsdesk.operations (expires_at) INCLUDE (tenant)
    WHERE state = 'completed';
