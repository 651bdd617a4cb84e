-- Two races a review found in migration 00010 (each with a test in
-- internal/retention):
--
-- * purge_batch renewed an identity's expired tombstone by its row
--   address; a concurrent run's purge_tombstones could delete it in
--   between, and the purged record was left without a tombstone (a late
--   retry of a tool that rejects them would have run again). The
--   tombstone is now locked as it is found.
-- * A conflict was checked against its record's identity only, so one read
--   before a purge and recorded after the identity was created again named
--   the new record with the old one's id. It must now name the record by
--   its id too; the library takes the refusal as a race and starts over.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.purge_batch(p_run bigint, p_limit integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r      opsdesk.purge_runs;
    n_purged integer;
BEGIN
    PERFORM opsdesk.purge_allowed();
    SELECT * INTO r FROM opsdesk.purge_runs WHERE id = p_run AND role = session_user AND finished_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no unfinished purge run % of %', p_run, session_user USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH picked AS (
        SELECT o.ctid AS row FROM opsdesk.operations o
        WHERE o.state = 'completed' AND o.expires_at <= least(r.before, now()) AND NOT o.held
          AND (r.tool IS NULL OR o.tool = r.tool)
          AND NOT EXISTS (SELECT FROM opsdesk.conflicts c
                          WHERE c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key AND c.reviewed_at IS NULL)
        ORDER BY o.expires_at
        LIMIT greatest(1, least(p_limit, 10000))
        FOR UPDATE OF o SKIP LOCKED
    ), gone AS (
        DELETE FROM opsdesk.operations o USING picked p WHERE o.ctid = p.row
        RETURNING o.tenant, o.tool, o.key, o.id, o.fingerprint, o.conflict_count
    ), reviewed AS (
        DELETE FROM opsdesk.conflicts c USING gone g
        WHERE g.conflict_count > 0 AND c.tenant = g.tenant AND c.tool = g.tool AND c.key = g.key
          AND c.reviewed_at IS NOT NULL
    ), stones AS (
        -- A subquery per record, not a join: the tombstones grow during
        -- a purge faster than their statistics, and a join planned on
        -- stale ones read every tombstone in every batch.
        SELECT g.tenant, g.tool, g.key, g.id, g.fingerprint,
            -- Locked: a concurrent run's purge_tombstones may be deleting
            -- it (an expired tombstone); then this waits, finds none and
            -- inserts a new one instead of renewing one that is gone.
            (SELECT t.ctid FROM opsdesk.tombstones t WHERE t.tenant = g.tenant AND t.tool = g.tool AND t.key = g.key
             FOR UPDATE) AS stone,
            now() + coalesce((r.tombstone_for->>g.tool)::numeric, (r.tombstone_for->>'*')::numeric, 604800)
                * interval '1 second' AS expires_at
        FROM gone g
    ), renewed AS (
        UPDATE opsdesk.tombstones t
        SET operation_id = s.id, fingerprint = s.fingerprint, purged_at = now(), expires_at = s.expires_at
        FROM stones s
        -- By row address, whatever the statistics say (as above).
        WHERE t.ctid = ANY (ARRAY(SELECT s.stone FROM stones s WHERE s.stone IS NOT NULL)) AND t.ctid = s.stone
    ), added AS (
        INSERT INTO opsdesk.tombstones (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at)
        SELECT s.tenant, s.tool, s.key, s.id, s.fingerprint, now(), s.expires_at FROM stones s WHERE s.stone IS NULL
    ), counts AS (
        SELECT tenant, count(*) AS n, min(id) AS first_id, max(id) AS last_id FROM gone GROUP BY tenant
    ), total AS (
        SELECT sum(n)::integer AS n, min(first_id) AS first_id, max(last_id) AS last_id FROM counts
    )
    UPDATE opsdesk.purge_runs SET
        batches = batches + 1, purged = purge_runs.purged + total.n,
        first_id = least(purge_runs.first_id, total.first_id),
        last_id = greatest(purge_runs.last_id, total.last_id),
        per_tenant = (SELECT jsonb_object_agg(k, coalesce((per_tenant->>k)::bigint, 0) + coalesce(c.n, 0))
                      FROM (SELECT jsonb_object_keys(per_tenant) AS k UNION SELECT tenant FROM counts) keys
                      LEFT JOIN counts c ON c.tenant = keys.k)
    FROM total
    WHERE id = p_run AND total.n > 0
    RETURNING total.n INTO n_purged;
    RETURN coalesce(n_purged, 0);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.conflict_needs_record() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- The lock keeps the record until this conflict commits: a purge
    -- skips it (SKIP LOCKED) or, having locked it first, makes this wait
    -- and then fail.
    PERFORM FROM opsdesk.operations
    WHERE tenant = NEW.tenant AND tool = NEW.tool AND key = NEW.key AND id = NEW.operation_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'insert or update on table "conflicts" violates foreign key constraint "conflicts_operation_fkey"'
            USING ERRCODE = 'foreign_key_violation', SCHEMA = 'opsdesk', TABLE = 'conflicts',
                CONSTRAINT = 'conflicts_operation_fkey',
                DETAIL = format('Key (tenant, tool, key)=(%s, %s, %s) with id %s is not present in table "operations".',
                    NEW.tenant, NEW.tool, NEW.key, NEW.operation_id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
