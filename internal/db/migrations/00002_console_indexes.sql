-- Indexes for the console's overview: each count it shows is exact and
-- must stay fast over millions of completed records
-- (internal/storeview BenchmarkConsoleQueries). Small partial indexes: they
-- hold only the rare rows they count.

-- +goose Up
-- Rejected records (overview tile, state:rejected).
CREATE INDEX operations_rejected_idx ON opsdesk.operations (id)
    WHERE state = 'completed' AND outcome = 'rejected';

-- Released records (overview tile, state:released).
CREATE INDEX operations_released_idx ON opsdesk.operations (id)
    WHERE state = 'released';

-- Records with conflicting attempts (overview tile, state:conflicted).
CREATE INDEX operations_conflicted_idx ON opsdesk.operations (id)
    WHERE conflict_count > 0;

-- Retention: what expires soon (overview), the retention sort, and later
-- the purge.
CREATE INDEX operations_retention_idx ON opsdesk.operations (expires_at)
    WHERE state = 'completed';
