-- What opsdesk exporter (internal/exporter) reads at every scrape, with
-- a viewer's role, within its time budget (issue 12):
--
-- * Rejected and released records by tool. The console's partial indexes
--   on them (migrations 00002, 00006) are in id order, for its lists: a
--   tool's count would walk every rejected record of every tool and fetch
--   each from the table to read its tool. These lead with the tool (then
--   the tenant), so a tool's or a tenant's tool's count is a range read
--   index-only that stops at the cap (1,001) like the overview's. Both hold
--   rare records only; the library's usual write, a record that succeeds,
--   adds nothing to them.
-- * How many purge runs are unfinished. Purge runs are an admin's of every
--   tenant (migration 00017: they carry reasons and span tenants), yet an
--   unfinished one must page whoever watches the store, and an exporter
--   needs no more than a viewer's role. Their number tells a viewer of
--   every tenant nothing it cannot read already: the start records of the
--   '' chain are visible to it. unfinished_purge_runs() returns it to a
--   role that sees every tenant and NULL to others, for whom a run that
--   spans tenants they do not see is none of their business.

-- +goose Up
CREATE INDEX operations_rejected_tool_idx ON opsdesk.operations (tool, tenant)
    WHERE state = 'completed' AND outcome = 'rejected';
CREATE INDEX operations_released_tool_idx ON opsdesk.operations (tool, tenant)
    WHERE state = 'released';

-- unfinished_purge_runs counts the purge runs started and never finished
-- (storeview's UnfinishedPurges lists them) for a role that sees every
-- tenant; NULL for others.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.unfinished_purge_runs() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN opsdesk.sees_every_tenant()
    THEN (SELECT count(*) FROM opsdesk.purge_runs WHERE finished_at IS NULL) END
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.unfinished_purge_runs() OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.unfinished_purge_runs() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.unfinished_purge_runs() TO opsdesk_viewer;
