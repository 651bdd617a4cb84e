-- Tombstones expire: once a tombstone's time (the tool's retry window) is
-- over, a late retry runs as new work whatever the tool's policy, and the
-- tombstone only takes room. A purge run removes the expired tombstones of
-- the tools it purges, in batches (purge_tombstones, through the BRIN
-- index on expires_at), and its audit record counts them (purge_finish,
-- migration 00014).

-- +goose Up
ALTER TABLE opsdesk.purge_runs ADD COLUMN tombstones_expired bigint NOT NULL DEFAULT 0;

-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_tombstones(p_run bigint, p_limit integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r opsdesk.purge_runs;
    n integer;
BEGIN
    PERFORM opsdesk.purge_allowed();
    SELECT * INTO r FROM opsdesk.purge_runs WHERE id = p_run AND role = session_user AND finished_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no unfinished purge run % of %', p_run, session_user USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH gone AS (
        DELETE FROM opsdesk.tombstones t
        WHERE t.ctid = ANY (ARRAY(
            SELECT x.ctid FROM opsdesk.tombstones x
            WHERE x.expires_at <= now() AND (r.tool IS NULL OR x.tool = r.tool)
            LIMIT greatest(1, least(p_limit, 10000))
            FOR UPDATE SKIP LOCKED))
          AND t.expires_at <= now()
        RETURNING 1
    )
    SELECT count(*) INTO n FROM gone;
    UPDATE opsdesk.purge_runs SET tombstones_expired = tombstones_expired + n WHERE id = p_run;
    RETURN n;
END
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.purge_tombstones(bigint, integer) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.purge_tombstones(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.purge_tombstones(bigint, integer) TO opsdesk_viewer;
