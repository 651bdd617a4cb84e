-- Retention purges: completed records whose retention ended go, in small
-- batches that skip locked rows so the library's traffic is not blocked,
-- leaving tombstones. A purge is a run: it can stop half-way and resume,
-- and one audit record (chain '') says what the whole run purged.
-- Pending records, records under legal hold and records with unreviewed
-- conflicts are never purged.

-- +goose Up
-- Legal hold (set and released by admins, audited).
ALTER TABLE opsdesk.operations ADD COLUMN held boolean NOT NULL DEFAULT false;
GRANT SELECT (held) ON opsdesk.operations TO opsdesk_viewer;

CREATE TABLE opsdesk.purge_runs (
    id            bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    role          text        NOT NULL,
    tool          text,                 -- NULL: every tool
    before        timestamptz NOT NULL, -- retention ended before this
    -- Seconds each tool's tombstones last ("*": the others).
    tombstone_for jsonb       NOT NULL,
    reason        text        NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    batches       integer     NOT NULL DEFAULT 0,
    purged        bigint      NOT NULL DEFAULT 0,
    first_id      bigint,
    last_id       bigint,
    per_tenant    jsonb       NOT NULL DEFAULT '{}',
    CONSTRAINT purge_runs_pkey PRIMARY KEY (id),
    CONSTRAINT purge_runs_reason CHECK (octet_length(reason) BETWEEN 1 AND 2000)
);
GRANT SELECT ON opsdesk.purge_runs TO opsdesk_admin;
GRANT SELECT, INSERT, UPDATE ON opsdesk.purge_runs TO opsdesk_owner;
GRANT DELETE ON opsdesk.operations, opsdesk.conflicts TO opsdesk_owner;
GRANT UPDATE ON opsdesk.tombstones TO opsdesk_owner;
-- The owner writes tombstones for any tenant it sees (admins of every
-- tenant only, below).
CREATE POLICY purge ON opsdesk.tombstones FOR INSERT TO opsdesk_owner WITH CHECK (true);
CREATE POLICY purge_update ON opsdesk.tombstones FOR UPDATE TO opsdesk_owner USING (true) WITH CHECK (true);

-- purge_allowed refuses unless session_user is an admin of every tenant.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_allowed() RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT pg_has_role(session_user, 'opsdesk_admin', 'MEMBER') OR NOT opsdesk.sees_every_tenant() THEN
        RAISE EXCEPTION '% may not purge: it needs opsdesk_admin and every tenant', session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;
-- +goose StatementEnd

-- purge_start starts a run, or resumes this role's unfinished run with the
-- same criteria (p_before NULL: now, and any unfinished run of the tool
-- resumes).
-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_start(p_tool text, p_before timestamptz, p_tombstone_for jsonb, p_reason text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    run bigint;
BEGIN
    PERFORM opsdesk.purge_allowed();
    IF p_before > now() THEN
        RAISE EXCEPTION 'purge before %: a time no later than now', p_before USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT id INTO run FROM opsdesk.purge_runs
    WHERE role = session_user AND finished_at IS NULL AND tool IS NOT DISTINCT FROM p_tool
      AND (p_before IS NULL OR before = p_before)
    ORDER BY id LIMIT 1;
    IF run IS NULL THEN
        INSERT INTO opsdesk.purge_runs (role, tool, before, tombstone_for, reason)
        VALUES (session_user, p_tool, coalesce(p_before, now()), p_tombstone_for, btrim(p_reason))
        RETURNING id INTO run;
    END IF;
    RETURN run;
END
$$;
-- +goose StatementEnd

-- purge_batch purges up to p_limit records of run p_run, the earliest
-- expired first, skipping rows others hold locks on; 0 means the run has
-- nothing left. Each batch is its caller's transaction.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_batch(p_run bigint, p_limit integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r   opsdesk.purge_runs;
    ids bigint[];
    n   integer;
BEGIN
    PERFORM opsdesk.purge_allowed();
    SELECT * INTO r FROM opsdesk.purge_runs WHERE id = p_run AND role = session_user AND finished_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no unfinished purge run % of %', p_run, session_user USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT array_agg(id) INTO ids FROM (
        SELECT o.id FROM opsdesk.operations o
        WHERE o.state = 'completed' AND o.expires_at <= least(r.before, now()) AND NOT o.held
          AND (r.tool IS NULL OR o.tool = r.tool)
          AND NOT EXISTS (SELECT FROM opsdesk.conflicts c
                          WHERE c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key AND c.reviewed_at IS NULL)
        ORDER BY o.expires_at
        LIMIT greatest(1, least(p_limit, 10000))
        FOR UPDATE OF o SKIP LOCKED) v;
    n := coalesce(cardinality(ids), 0);
    IF n = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO opsdesk.tombstones AS t (tenant, tool, key, operation_id, fingerprint, purged_at, expires_at)
    SELECT o.tenant, o.tool, o.key, o.id, o.fingerprint, now(),
        now() + coalesce((r.tombstone_for->>o.tool)::numeric, (r.tombstone_for->>'*')::numeric, 604800) * interval '1 second'
    FROM opsdesk.operations o WHERE o.id = ANY (ids)
    ON CONFLICT (tenant, tool, key) DO UPDATE
        SET operation_id = excluded.operation_id, fingerprint = excluded.fingerprint,
            purged_at = excluded.purged_at, expires_at = excluded.expires_at;
    -- Their reviewed conflicts go with them (only records that had any).
    DELETE FROM opsdesk.conflicts c USING opsdesk.operations o
    WHERE o.id = ANY (ids) AND o.conflict_count > 0 AND c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key;
    WITH gone AS (DELETE FROM opsdesk.operations WHERE id = ANY (ids) RETURNING tenant, id),
         counts AS (SELECT tenant, count(*) AS n FROM gone GROUP BY tenant)
    UPDATE opsdesk.purge_runs SET
        batches = batches + 1, purged = purged + n,
        first_id = least(first_id, (SELECT min(id) FROM unnest(ids) id)),
        last_id = greatest(last_id, (SELECT max(id) FROM unnest(ids) id)),
        per_tenant = (SELECT jsonb_object_agg(k, coalesce((per_tenant->>k)::bigint, 0) + coalesce(c.n, 0))
                      FROM (SELECT jsonb_object_keys(per_tenant) AS k UNION SELECT tenant FROM counts) keys
                      LEFT JOIN counts c ON c.tenant = keys.k)
    WHERE id = p_run;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- purge_finish closes run p_run and appends its one audit record: the
-- criteria, how many records went per tenant, the id range, the batches.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_finish(p_run bigint, p_display_name text DEFAULT NULL,
    OUT audit_tenant text, OUT audit_seq bigint, OUT purged bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r opsdesk.purge_runs;
    a opsdesk.audit;
BEGIN
    PERFORM opsdesk.purge_allowed();
    UPDATE opsdesk.purge_runs SET finished_at = now()
    WHERE id = p_run AND role = session_user AND finished_at IS NULL RETURNING * INTO r;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no unfinished purge run % of %', p_run, session_user USING ERRCODE = 'invalid_parameter_value';
    END IF;
    a.tenant := '';
    a.action := 'retention:purge';
    a.outcome := 'succeeded';
    a.reason := r.reason;
    a.display_name := left(p_display_name, 200);
    a.tool := r.tool;
    a.details := jsonb_strip_nulls(jsonb_build_object('run', r.id, 'before', r.before, 'tool', r.tool,
        'purged', r.purged, 'per_tenant', r.per_tenant, 'first_id', r.first_id, 'last_id', r.last_id,
        'batches', r.batches, 'started_at', r.started_at, 'tombstone_for', r.tombstone_for));
    a := opsdesk.audit_append(a);
    audit_tenant := a.tenant;
    audit_seq := a.seq;
    purged := r.purged;
END
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.purge_allowed() OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_batch(bigint, integer) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_finish(bigint, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.purge_allowed(), opsdesk.purge_start(text, timestamptz, jsonb, text),
    opsdesk.purge_batch(bigint, integer), opsdesk.purge_finish(bigint, text) FROM PUBLIC;
-- Every person may call them: purge_allowed refuses all but admins of
-- every tenant, saying why.
GRANT EXECUTE ON FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text),
    opsdesk.purge_batch(bigint, integer), opsdesk.purge_finish(bigint, text) TO opsdesk_viewer;
GRANT EXECUTE ON FUNCTION opsdesk.purge_allowed() TO opsdesk_owner;
