-- Parallel purge batches (issue 5, third measurement in
-- docs/benchmarks.md). Under the library's traffic one purge connection
-- gets about its fair share of the cores, too little for the target, so a
-- purge may run several batch loops of one run side by side. Their
-- records are disjoint already (FOR UPDATE SKIP LOCKED); what serialized
-- them was the run's row, which every batch locked FOR UPDATE and updated
-- with its counts for the whole of its transaction.
--
-- Now a batch locks its run FOR SHARE (batches do not wait for each
-- other; purge_finish's update waits for the batches in flight, and a
-- batch that comes after it finds the run finished) and writes its counts
-- to a row of its own in purge_batches. purge_finish folds the batches
-- into the run's row, which then says what the whole run purged, and its
-- one audit record says so as before. A run's totals are always its row
-- plus its batches' rows: runs resumed from before this migration keep
-- the counts their earlier batches wrote into the run's row.

-- +goose Up
CREATE TABLE opsdesk.purge_batches (
    run        bigint      NOT NULL,
    id         bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    purged     integer     NOT NULL,
    per_tenant jsonb       NOT NULL,
    first_id   bigint      NOT NULL,
    last_id    bigint      NOT NULL,
    done_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT purge_batches_pkey PRIMARY KEY (run, id),
    CONSTRAINT purge_batches_run_fkey FOREIGN KEY (run) REFERENCES opsdesk.purge_runs (id)
);
GRANT SELECT ON opsdesk.purge_batches TO opsdesk_admin;
GRANT SELECT, INSERT, DELETE ON opsdesk.purge_batches TO opsdesk_owner;

-- purge_batch in one statement: the records are locked, deleted by their
-- row address and tombstoned from what the delete returns, so each is
-- found once. An identity purged before and created again has a tombstone
-- already, which is brought up to date; the others are plain inserts
-- (ON CONFLICT's speculative insertion doubled the cost of each). Only
-- reviewed conflicts go with their records: an unreviewed one committed
-- after the batch chose its records makes the batch fail (the check
-- of migration 00010) rather than vanish.
-- The run is locked FOR SHARE, and the batch's counts go to a row of
-- its own.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.purge_batch(p_run bigint, p_limit integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r        opsdesk.purge_runs;
    n_purged integer;
BEGIN
    PERFORM opsdesk.purge_allowed();
    -- Shared with the run's other batches; purge_finish waits for it.
    SELECT * INTO r FROM opsdesk.purge_runs WHERE id = p_run AND role = session_user AND finished_at IS NULL FOR SHARE;
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
        WHERE t.ctid = ANY (ARRAY(SELECT s.stone FROM stones s WHERE s.stone IS NOT NULL)) AND t.ctid = s.stone
    ), added AS (
        INSERT INTO opsdesk.tombstones (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at)
        SELECT s.tenant, s.tool, s.key, s.id, s.fingerprint, now(), s.expires_at FROM stones s WHERE s.stone IS NULL
    ), counts AS (
        SELECT tenant, count(*) AS n, min(id) AS first_id, max(id) AS last_id FROM gone GROUP BY tenant
    )
    INSERT INTO opsdesk.purge_batches (run, purged, per_tenant, first_id, last_id)
    SELECT p_run, sum(n), jsonb_object_agg(tenant, n), min(first_id), max(last_id) FROM counts
    HAVING count(*) > 0
    RETURNING purged INTO n_purged;
    RETURN coalesce(n_purged, 0);
END
$$;
-- +goose StatementEnd

-- purge_finish as in migration 00008, folding the run's batches into its
-- row first and counting the expired tombstones the run removed
-- (migration 00013). It needs READ COMMITTED: its first statement waits for the
-- batches in flight, and only a later statement's fresh snapshot sees
-- what they committed (a REPEATABLE READ snapshot would miss them).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.purge_finish(p_run bigint, p_display_name text DEFAULT NULL,
    OUT audit_tenant text, OUT audit_seq bigint, OUT purged bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r opsdesk.purge_runs;
    a opsdesk.audit;
BEGIN
    PERFORM opsdesk.purge_allowed();
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'finish a purge run in a READ COMMITTED transaction, not %',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                HINT = 'It adds up the batches that committed while it waited for them.';
    END IF;
    UPDATE opsdesk.purge_runs SET finished_at = now()
    WHERE id = p_run AND role = session_user AND finished_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no unfinished purge run % of %', p_run, session_user USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH done AS (
        DELETE FROM opsdesk.purge_batches b WHERE b.run = p_run RETURNING b.purged, b.per_tenant, b.first_id, b.last_id
    ), tenants AS (
        SELECT t.key AS tenant, sum(t.value::bigint) AS n FROM done, jsonb_each_text(done.per_tenant) t GROUP BY t.key
    )
    UPDATE opsdesk.purge_runs u SET
        batches = u.batches + (SELECT count(*) FROM done),
        purged = u.purged + (SELECT coalesce(sum(done.purged), 0) FROM done),
        first_id = least(u.first_id, (SELECT min(done.first_id) FROM done)),
        last_id = greatest(u.last_id, (SELECT max(done.last_id) FROM done)),
        per_tenant = (SELECT coalesce(jsonb_object_agg(k, coalesce((u.per_tenant->>k)::bigint, 0) + coalesce(c.n, 0)), '{}')
                      FROM (SELECT jsonb_object_keys(u.per_tenant) AS k UNION SELECT tenant FROM tenants) keys
                      LEFT JOIN tenants c ON c.tenant = keys.k)
    WHERE u.id = p_run
    RETURNING * INTO r;
    a.tenant := '';
    a.action := 'retention:purge';
    a.outcome := 'succeeded';
    a.reason := r.reason;
    a.display_name := left(p_display_name, 200);
    a.tool := r.tool;
    a.details := jsonb_strip_nulls(jsonb_build_object('run', r.id, 'before', r.before, 'tool', r.tool,
        'purged', r.purged, 'per_tenant', r.per_tenant, 'first_id', r.first_id, 'last_id', r.last_id,
        'batches', r.batches, 'started_at', r.started_at, 'tombstone_for', r.tombstone_for,
        'tombstones_expired', r.tombstones_expired));
    a := opsdesk.audit_append(a);
    audit_tenant := a.tenant;
    audit_seq := a.seq;
    purged := r.purged;
END
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.purge_batch(bigint, integer) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_finish(bigint, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.purge_batch(bigint, integer), opsdesk.purge_finish(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.purge_batch(bigint, integer), opsdesk.purge_finish(bigint, text) TO opsdesk_viewer;
