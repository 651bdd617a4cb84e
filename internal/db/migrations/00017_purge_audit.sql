-- Purges and legal holds audited before they change anything, their
-- parameters checked, their refusals audited (issue 10).
--
-- * Nothing is deleted before its audit record commits. purge_start
--   appends the run's start record (action retention:purge-start, chain
--   ''): who, why, the tool, the cut-off, the tombstone lifetimes and the
--   count the dry run promised. Resuming an unfinished run appends a resume
--   record (retention:purge-resume) naming the start record, what the run
--   purged so far and this call's promise. purge_batch and purge_tombstones
--   delete only for a run whose latest start or resume record was written
--   by another, committed, transaction: a caller who starts and purges in
--   one transaction (savepoints or not) is refused. purge_finish appends the
--   result (retention:purge), naming the start record. Before this
--   migration only purge_finish audited: a caller who ran the batches and
--   never finished deleted records with no audit record at all.
-- * A run deletes no more than promised: purge_batch takes at most what
--   the latest start or resume allows (what the run purged before it plus
--   its promise), counting the batches committed so far. Batches running
--   side by side do not see each other's uncommitted counts: the Go side
--   shares one budget between its workers, which keeps the total exact.
-- * Every parameter is checked, every number bounded: tool names, the
--   cut-off, the tombstone lifetimes (a JSON object of tool name or '*' to
--   seconds, from 1 second to 100 years: a negative lifetime made
--   tombstones already expired, which defeated after_expiry: reject), batch
--   sizes (1 to 10,000, refused rather than clamped), run numbers, record
--   numbers (no NULLs, at most 10,000). Reasons and display names go
--   through clean_reason.
-- * Refusals are audited. The purge functions and set_hold raised, which
--   rolled their refusal back with everything else; now they return it
--   (through opsdesk.refuse, as decide does), so its audit record commits.
--   Their return types change: DROP and CREATE.
-- * A hold or release is all or nothing: when some records are missing
--   (or not visible to the role), nothing is held and the refusal names
--   them.
-- * purge_runs and purge_batches get row-level security: their counts
--   per tenant and their reasons are for admins of every tenant only (a
--   one-tenant admin read every tenant's).
--
-- Found by review:
-- set_hold takes the records' gates before
-- their rows (issue 10, found by the review). Migration 00016 has every
-- person who holds a record hold its gate first, so that a decision
-- waiting for it waits in the gate and ends a holder that stalls it; set_hold
-- locked the rows alone, and a one-tenant admin's
--   SELECT opsdesk.set_hold(ARRAY[id], true, 'x'), pg_sleep(600)
-- kept every operator's decision on that record waiting on its row for ten
-- minutes. Now that decision waits in the record's gate and ends the
-- admin's session after 2 s; the hold rolls back with its audit records.
-- A hold of many records takes the gates of their buckets (at most 4,096),
-- in bucket order.
--
-- purge_start bounds the dry run's count
-- above too (at most 10^15, more records than any table holds): a resume
-- adds it to what the run purged, and a count near the bigint limit made
-- that sum raise "bigint out of range", rolling the refusal back unaudited.

-- +goose Up

-- Reasons and display names go through opsdesk.clean_reason (migration
-- 00016).

DROP FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text);
DROP FUNCTION opsdesk.purge_batch(bigint, integer);
DROP FUNCTION opsdesk.purge_tombstones(bigint, integer);
DROP FUNCTION opsdesk.purge_finish(bigint, text);
DROP FUNCTION opsdesk.purge_allowed();
DROP FUNCTION opsdesk.set_hold(bigint[], boolean, text, text);

-- What the run's latest start or resume allows, who started it and the
-- audit records that say so. Runs started before this migration have
-- none: purge_start resumes them with a resume record before any batch.
ALTER TABLE opsdesk.purge_runs
    ADD COLUMN display_name text,
    -- The dry run's count when the run started.
    ADD COLUMN promised bigint,
    -- The most the run may purge in all: what it purged before its latest
    -- start or resume, plus that call's promise.
    ADD COLUMN may_purge bigint,
    -- The start record, and the latest start or resume record (chain '').
    ADD COLUMN start_seq bigint,
    ADD COLUMN audit_seq bigint,
    -- The transaction that wrote the latest start or resume record.
    ADD COLUMN audited_xact xid8;
CREATE INDEX purge_runs_unfinished_idx ON opsdesk.purge_runs (id) WHERE finished_at IS NULL;

-- A purge function's answer: decision_result's first five fields, the run
-- and its figures.
CREATE TYPE opsdesk.purge_result AS (
    outcome    text,   -- succeeded, denied or failed
    code       text,   -- not_permitted, invalid
    message    text,
    tenant     text,   -- the audit record this call appended ('' chain);
    seq        bigint, -- NULL for a batch, which appends none
    run        bigint,
    -- purge_start: what the run purged before (a resume); purge_batch:
    -- this batch; purge_finish: the run's total.
    purged     bigint,
    -- purge_tombstones: expired tombstones this call removed;
    -- purge_finish: the run's total.
    tombstones bigint
);

-- may_purge: session_user is an admin of every tenant.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.may_purge() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_has_role(session_user, 'opsdesk_admin', 'MEMBER') AND opsdesk.sees_every_tenant() $$;
-- +goose StatementEnd

-- purge_refused is refuse's answer as a purge function's.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_refused(d opsdesk.decision_result, p_run bigint) RETURNS opsdesk.purge_result
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT (d.outcome, d.code, d.message, d.tenant, d.seq, p_run, NULL, NULL)::opsdesk.purge_result $$;
-- +goose StatementEnd

-- tool_name_problem says what is wrong with a tool name (NULL: nothing),
-- by the library's rules (ops.checkName): 1 to 128 bytes, no control
-- characters.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.tool_name_problem(p text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE
    WHEN p IS NULL OR p = '' THEN 'a tool name must not be empty'
    WHEN octet_length(p) > 128 THEN 'a tool name of ' || octet_length(p) || ' bytes: the limit is 128'
    WHEN p ~ '[\u0001-\u001f\u007f-\u009f]' THEN 'the tool name ' || to_jsonb(left(p, 40))::text || ' contains a control character'
END
$$;
-- +goose StatementEnd

-- tombstone_policy_problem says what is wrong with a purge's tombstone
-- lifetimes (NULL: nothing): a JSON object of at most 64 KiB whose keys are
-- tool names or '*' (the others) and whose values are seconds, numbers from
-- 1 to 3,155,760,000 (100 years). Too short a lifetime defeats the tool's
-- after_expiry (a negative one made the tombstones expired already); too
-- long a one overflows the timestamps.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.tombstone_policy_problem(p jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k       text;
    v       jsonb;
    problem text;
BEGIN
    IF p IS NULL OR jsonb_typeof(p) <> 'object' THEN
        RETURN 'the tombstone lifetimes are a JSON object of tool name (or "*") to seconds, not '
            || coalesce(jsonb_typeof(p), 'NULL');
    ELSIF octet_length(p::text) > 65536 THEN
        RETURN 'the tombstone lifetimes are limited to 64 KiB of JSON';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(p) LOOP
        problem := CASE WHEN k <> '*' THEN opsdesk.tool_name_problem(k) END;
        IF problem IS NOT NULL THEN
            RETURN 'tombstone lifetimes: ' || problem;
        ELSIF jsonb_typeof(v) <> 'number' THEN
            RETURN 'the tombstone lifetime of ' || to_jsonb(left(k, 40))::text || ' is ' || left(v::text, 40)
                || ', not a number of seconds';
        ELSIF v::numeric < 1 OR v::numeric > 3155760000 THEN
            RETURN 'the tombstone lifetime of ' || to_jsonb(left(k, 40))::text || ' is ' || left(v::text, 40)
                || ' seconds: from 1 to 3155760000 (100 years)';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- purge_start starts a run, or resumes this role's unfinished run with the
-- same criteria (p_before NULL: now, and any unfinished run of the tool
-- resumes), and appends the start or resume record. p_promised is the dry
-- run's count: the most the run may now purge (a resumed run: on top of
-- what it purged before). Its batches wait for this transaction to commit.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.purge_start(p_tool text, p_before timestamptz, p_tombstone_for jsonb, p_reason text,
    p_promised bigint, p_display_name text DEFAULT NULL)
RETURNS opsdesk.purge_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a       opsdesk.audit;
    r       opsdesk.purge_runs;
    so_far  bigint;
    problem text;
BEGIN
    a.tenant := '';
    a.action := 'retention:purge-start';
    a.reason := opsdesk.clean_reason(p_reason);
    a.display_name := opsdesk.clean_reason(p_display_name);
    -- Refusals say what was asked (refuse cuts what is too long).
    a.details := jsonb_strip_nulls(jsonb_build_object('tool', left(p_tool, 200), 'before', p_before,
        'tombstone_for', p_tombstone_for, 'promised', p_promised));
    IF NOT opsdesk.may_purge() THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'not_permitted',
            session_user || ' may not purge: it needs opsdesk_admin and every tenant'), NULL);
    ELSIF a.reason IS NULL THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid', 'a reason is required'), NULL);
    ELSIF octet_length(a.reason) > 2000 OR octet_length(a.display_name) > 200 THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid',
            'the reason is limited to 2000 bytes, the display name to 200'), NULL);
    END IF;
    problem := CASE WHEN p_tool IS NOT NULL THEN opsdesk.tool_name_problem(p_tool) END;
    IF problem IS NOT NULL THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid', problem || ' (NULL: every tool)'), NULL);
    ELSIF p_before IS NOT NULL AND (NOT isfinite(p_before) OR p_before > now()) THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid',
            'purge before ' || p_before || ': a time no later than now (NULL: now)'), NULL);
    ELSIF p_promised IS NULL OR p_promised < 0 OR p_promised > 1000000000000000 THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid',
            'the dry run''s count, the most the purge may take, is required: a number from 0 to 1000000000000000, not '
            || coalesce(p_promised::text, 'NULL')), NULL);
    END IF;
    problem := opsdesk.tombstone_policy_problem(p_tombstone_for);
    IF problem IS NOT NULL THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid', problem), NULL);
    END IF;
    a.tool := p_tool;
    a.outcome := 'succeeded';

    -- Locked: the resume waits for the run's batches in flight, and counts
    -- them.
    SELECT * INTO r FROM opsdesk.purge_runs
    WHERE role = session_user AND finished_at IS NULL AND tool IS NOT DISTINCT FROM p_tool
      AND (p_before IS NULL OR before = p_before)
    ORDER BY id LIMIT 1
    FOR UPDATE;
    IF FOUND THEN
        -- A run's totals are its row plus its batches' (migration 00014).
        so_far := r.purged + coalesce((SELECT sum(b.purged) FROM opsdesk.purge_batches b WHERE b.run = r.id), 0);
        a.action := 'retention:purge-resume';
        a.details := jsonb_strip_nulls(jsonb_build_object('run', r.id, 'start_seq', r.start_seq,
            'started_by', r.role, 'started_at', r.started_at, 'tool', r.tool, 'before', r.before,
            'tombstone_for', r.tombstone_for, 'purged_so_far', so_far, 'promised', p_promised,
            'may_purge', so_far + p_promised));
        a := opsdesk.audit_append(a);
        UPDATE opsdesk.purge_runs
        SET may_purge = so_far + p_promised, audit_seq = a.seq, audited_xact = pg_current_xact_id()
        WHERE id = r.id;
        RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, r.id, so_far, NULL)::opsdesk.purge_result;
    END IF;

    -- pg_current_xact_id is the top-level transaction's, in a savepoint
    -- too: purge_batch compares it with its own.
    INSERT INTO opsdesk.purge_runs (role, tool, before, tombstone_for, reason, display_name, promised, may_purge,
        audited_xact)
    VALUES (session_user, p_tool, coalesce(p_before, now()), p_tombstone_for, a.reason, a.display_name, p_promised,
        p_promised, pg_current_xact_id())
    RETURNING * INTO r;
    a.details := jsonb_strip_nulls(jsonb_build_object('run', r.id, 'tool', r.tool, 'before', r.before,
        'tombstone_for', r.tombstone_for, 'promised', p_promised));
    a := opsdesk.audit_append(a);
    UPDATE opsdesk.purge_runs SET start_seq = a.seq, audit_seq = a.seq WHERE id = r.id;
    RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, r.id, 0, NULL)::opsdesk.purge_result;
END
$$;
-- +goose StatementEnd

-- purge_run_for_delete checks a call of purge_batch or purge_tombstones
-- (audit record a, filled in) and returns the run it may delete for, or the
-- audited refusal (refusal.outcome not NULL). The run is locked FOR SHARE
-- for a batch (batches of a run do not wait for each other; purge_finish
-- and a resume wait for them), FOR NO KEY UPDATE with p_exclusive (the
-- expired tombstones' count goes into the run's row).
-- A run whose latest start or resume record this very transaction wrote is
-- refused: that record is not committed, and a purge must not delete
-- before it is. The row is visible, so the transaction that wrote it
-- committed or is this one; pg_current_xact_id_if_assigned is the
-- top-level transaction's ID, savepoints or not, as purge_start's
-- pg_current_xact_id.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_run_for_delete(a opsdesk.audit, p_run bigint, p_limit integer, p_exclusive boolean,
    OUT run opsdesk.purge_runs, OUT refusal opsdesk.purge_result)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    problem text;
BEGIN
    IF NOT opsdesk.may_purge() THEN
        refusal := opsdesk.purge_refused(opsdesk.refuse(a, 'not_permitted',
            session_user || ' may not purge: it needs opsdesk_admin and every tenant'), p_run);
        RETURN;
    ELSIF p_run IS NULL OR p_run < 1 THEN
        problem := 'name a purge run: a number from 1, not ' || coalesce(p_run::text, 'NULL');
    ELSIF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        problem := 'a batch takes from 1 to 10000 records, not ' || coalesce(p_limit::text, 'NULL');
    ELSE
        IF p_exclusive THEN
            SELECT * INTO run FROM opsdesk.purge_runs
            WHERE id = p_run AND role = session_user AND finished_at IS NULL FOR NO KEY UPDATE;
        ELSE
            SELECT * INTO run FROM opsdesk.purge_runs
            WHERE id = p_run AND role = session_user AND finished_at IS NULL FOR SHARE;
        END IF;
        IF NOT FOUND THEN
            problem := 'no unfinished purge run ' || p_run || ' of ' || session_user;
        ELSIF run.audited_xact IS NULL THEN
            problem := 'purge run ' || p_run || ' has no start record: resume it with purge_start '
                || '(opsdesk retention purge) first';
        ELSIF run.audited_xact = pg_current_xact_id_if_assigned() THEN
            problem := 'purge run ' || p_run || ' was started (or resumed) in this transaction: its audit record '
                || 'must commit before anything is deleted; commit, then purge in transactions of their own';
        END IF;
    END IF;
    IF problem IS NOT NULL THEN
        run := NULL;
        refusal := opsdesk.purge_refused(opsdesk.refuse(a, 'invalid', problem), p_run);
    END IF;
END
$$;
-- +goose StatementEnd

-- purge_batch purges up to p_limit records of run p_run (migration 00014's
-- statement), the earliest expired first, skipping rows others hold locks
-- on, and no more than the run may still take; 0 means the run has nothing
-- left. Each batch is its caller's transaction, READ COMMITTED (the check
-- that no conflict points at a deleted record reads the latest committed
-- conflicts, migration 00010); its counts go to purge_batches, its audit
-- is the run's start and finish records.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_batch(p_run bigint, p_limit integer) RETURNS opsdesk.purge_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a        opsdesk.audit;
    r        opsdesk.purge_runs;
    chk      record;
    so_far   bigint;
    lim      integer;
    n_purged integer;
BEGIN
    a.tenant := '';
    a.action := 'retention:purge-batch';
    a.details := jsonb_build_object('run', p_run, 'limit', p_limit);
    SELECT * INTO chk FROM opsdesk.purge_run_for_delete(a, p_run, p_limit, false);
    IF (chk.refusal).outcome IS NOT NULL THEN
        RETURN chk.refusal;
    ELSIF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid', 'purge batches in a READ COMMITTED transaction, not '
            || upper(current_setting('transaction_isolation'))
            || ': the check that no conflict points at a purged record reads the latest committed conflicts'), p_run);
    END IF;
    r := chk.run;
    so_far := r.purged + coalesce((SELECT sum(b.purged) FROM opsdesk.purge_batches b WHERE b.run = r.id), 0);
    lim := least(p_limit, greatest(0, r.may_purge - so_far));
    IF lim = 0 THEN
        RETURN ('succeeded', NULL, NULL, NULL, NULL, p_run, 0, NULL)::opsdesk.purge_result;
    END IF;
    WITH picked AS (
        SELECT o.ctid AS row FROM opsdesk.operations o
        WHERE o.state = 'completed' AND o.expires_at <= least(r.before, now()) AND NOT o.held
          AND (r.tool IS NULL OR o.tool = r.tool)
          AND NOT EXISTS (SELECT FROM opsdesk.conflicts c
                          WHERE c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key AND c.reviewed_at IS NULL)
        ORDER BY o.expires_at
        LIMIT lim
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
    RETURN ('succeeded', NULL, NULL, NULL, NULL, p_run, coalesce(n_purged, 0), NULL)::opsdesk.purge_result;
END
$$;
-- +goose StatementEnd

-- purge_tombstones removes up to p_limit expired tombstones of run p_run's
-- tool (every tool's, for a run of every tool): migration 00013's, checked
-- as purge_batch is.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_tombstones(p_run bigint, p_limit integer) RETURNS opsdesk.purge_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a       opsdesk.audit;
    r       opsdesk.purge_runs;
    chk     record;
    n       integer;
BEGIN
    a.tenant := '';
    a.action := 'retention:purge-tombstones';
    a.details := jsonb_build_object('run', p_run, 'limit', p_limit);
    SELECT * INTO chk FROM opsdesk.purge_run_for_delete(a, p_run, p_limit, true);
    IF (chk.refusal).outcome IS NOT NULL THEN
        RETURN chk.refusal;
    END IF;
    r := chk.run;
    WITH gone AS (
        DELETE FROM opsdesk.tombstones t
        WHERE t.ctid = ANY (ARRAY(
            SELECT x.ctid FROM opsdesk.tombstones x
            WHERE x.expires_at <= now() AND (r.tool IS NULL OR x.tool = r.tool)
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED))
          AND t.expires_at <= now()
        RETURNING 1
    )
    SELECT count(*) INTO n FROM gone;
    UPDATE opsdesk.purge_runs SET tombstones_expired = tombstones_expired + n WHERE id = p_run;
    RETURN ('succeeded', NULL, NULL, NULL, NULL, p_run, NULL, n)::opsdesk.purge_result;
END
$$;
-- +goose StatementEnd

-- purge_finish closes run p_run and appends its result record
-- (retention:purge): the criteria, the start record, the promise, how many
-- records went per tenant, the id range, the batches, the expired
-- tombstones. It needs READ COMMITTED: its first statement waits for the
-- batches in flight, and only a later statement's fresh snapshot sees what
-- they committed.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.purge_finish(p_run bigint, p_display_name text DEFAULT NULL) RETURNS opsdesk.purge_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r opsdesk.purge_runs;
    a opsdesk.audit;
BEGIN
    a.tenant := '';
    a.action := 'retention:purge';
    a.display_name := opsdesk.clean_reason(p_display_name);
    a.details := jsonb_build_object('run', p_run);
    IF NOT opsdesk.may_purge() THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'not_permitted',
            session_user || ' may not purge: it needs opsdesk_admin and every tenant'), p_run);
    ELSIF p_run IS NULL OR p_run < 1 THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid',
            'name a purge run: a number from 1, not ' || coalesce(p_run::text, 'NULL')), p_run);
    ELSIF octet_length(a.display_name) > 200 THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid', 'the display name is limited to 200 bytes'), p_run);
    ELSIF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid', 'finish a purge run in a READ COMMITTED transaction, not '
            || upper(current_setting('transaction_isolation'))
            || ': it adds up the batches that committed while it waited for them'), p_run);
    END IF;
    UPDATE opsdesk.purge_runs SET finished_at = now()
    WHERE id = p_run AND role = session_user AND finished_at IS NULL;
    IF NOT FOUND THEN
        RETURN opsdesk.purge_refused(opsdesk.refuse(a, 'invalid',
            'no unfinished purge run ' || p_run || ' of ' || session_user), p_run);
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
    a.action := 'retention:purge';
    a.outcome := 'succeeded';
    a.reason := r.reason;
    a.tool := r.tool;
    a.details := jsonb_strip_nulls(jsonb_build_object('run', r.id, 'start_seq', r.start_seq,
        'last_resume_seq', nullif(r.audit_seq, r.start_seq), 'before', r.before, 'tool', r.tool,
        'promised', r.promised, 'may_purge', r.may_purge,
        'purged', r.purged, 'per_tenant', r.per_tenant, 'first_id', r.first_id, 'last_id', r.last_id,
        'batches', r.batches, 'started_at', r.started_at, 'started_by', r.role, 'tombstone_for', r.tombstone_for,
        'tombstones_expired', r.tombstones_expired));
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, r.id, r.purged, r.tombstones_expired)::opsdesk.purge_result;
END
$$;
-- +goose StatementEnd

-- set_hold holds records (a purge never deletes a held one) or releases
-- them, as an admin, with a reason; each record's change is audited on its
-- tenant's chain. All or nothing: when some records are missing (or not
-- visible to the role), nothing changes and the refusal names them
-- (missing). At most 10,000 records, no NULLs; repeated numbers count once.
-- On success the audit fields are NULL: the records are on the tenants'
-- chains, one per record changed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.set_hold(p_ids bigint[], p_hold boolean, p_reason text, p_display_name text DEFAULT NULL,
    OUT outcome text, OUT code text, OUT message text, OUT audit_tenant text, OUT audit_seq bigint,
    OUT changed integer, OUT unchanged integer, OUT missing bigint[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o     opsdesk.operations;
    a     opsdesk.audit;
    d     opsdesk.decision_result;
    ids   bigint[];
    bucket integer;
    verb  text := CASE WHEN p_hold IS FALSE THEN 'released' ELSE 'held' END;
BEGIN
    a.action := CASE WHEN p_hold IS FALSE THEN 'hold:release' ELSE 'hold:set' END;
    a.reason := opsdesk.clean_reason(p_reason);
    a.display_name := opsdesk.clean_reason(p_display_name);
    a.details := jsonb_build_object('count', cardinality(p_ids));
    changed := 0;
    unchanged := 0;
    IF NOT pg_has_role(session_user, 'opsdesk_admin', 'MEMBER') THEN
        d := opsdesk.refuse(a, 'not_permitted', session_user || ' may not hold or release records: it is not granted opsdesk_admin');
    ELSIF p_hold IS NULL THEN
        d := opsdesk.refuse(a, 'invalid', 'hold (true) or release (false), not NULL');
    ELSIF a.reason IS NULL THEN
        d := opsdesk.refuse(a, 'invalid', 'a reason is required');
    ELSIF octet_length(a.reason) > 2000 OR octet_length(a.display_name) > 200 THEN
        d := opsdesk.refuse(a, 'invalid', 'the reason is limited to 2000 bytes, the display name to 200');
    ELSIF coalesce(cardinality(p_ids), 0) = 0 THEN
        d := opsdesk.refuse(a, 'invalid', 'name at least one record');
    ELSIF array_ndims(p_ids) > 1 OR cardinality(p_ids) > 10000 THEN
        d := opsdesk.refuse(a, 'invalid', 'hold or release up to 10000 records at a time, in a one-dimensional array');
    ELSIF array_position(p_ids, NULL) IS NOT NULL THEN
        d := opsdesk.refuse(a, 'invalid', 'record numbers must not be NULL');
    END IF;
    IF d.outcome IS NOT NULL THEN
        SELECT d.outcome, d.code, d.message, d.tenant, d.seq INTO outcome, code, message, audit_tenant, audit_seq;
        RETURN;
    END IF;
    ids := ARRAY(SELECT DISTINCT i FROM unnest(p_ids) i ORDER BY i);
    -- Row-level security: records of tenants the admin does not see are
    -- missing too.
    missing := ARRAY(SELECT i FROM unnest(ids) i WHERE NOT EXISTS (SELECT FROM opsdesk.operations r WHERE r.id = i) ORDER BY i);
    IF cardinality(missing) = 0 THEN
        BEGIN
            -- The records' gates before their rows, as a decision takes
            -- them (opsdesk.subject), in bucket order so that two holds
            -- never wait for each other crosswise: a hold left open is then
            -- a holder the next decision on one of its records ends, not a
            -- row lock it waits on.
            FOR bucket IN SELECT DISTINCT hashint8(i) & 4095 FROM unnest(ids) i ORDER BY 1 LOOP
                PERFORM opsdesk.gate(2::smallint, bucket, 'the records of a hold');
            END LOOP;
            -- Locked, then compared again: a record purged since the first
            -- look is missing, not silently skipped.
            PERFORM FROM opsdesk.operations WHERE id = ANY (ids) ORDER BY id FOR UPDATE;
            missing := ARRAY(SELECT i FROM unnest(ids) i WHERE NOT EXISTS (SELECT FROM opsdesk.operations r WHERE r.id = i) ORDER BY i);
            IF cardinality(missing) > 0 THEN
                -- Let the gates and the rows go before refusing.
                RAISE EXCEPTION 'refused after locking' USING ERRCODE = 'OPS01';
            END IF;
        EXCEPTION WHEN SQLSTATE 'OPS01' THEN
            NULL;
        END;
    END IF;
    IF cardinality(missing) > 0 THEN
        a.operation_id := missing[1];
        a.details := a.details || jsonb_build_object('missing', to_jsonb(missing[1:20]), 'missing_count', cardinality(missing));
        d := opsdesk.refuse(a, 'not_found', NULL);
        -- The answer names them all (up to 10); the audit record the first
        -- 20.
        message := CASE WHEN cardinality(missing) = 1 THEN 'no operation ' ELSE 'no operations ' END
            || array_to_string(missing[1:10], ', ')
            || CASE WHEN cardinality(missing) > 10 THEN ' and ' || (cardinality(missing) - 10) || ' more' ELSE '' END
            || ' (or not visible to ' || session_user || '): nothing ' || verb;
        SELECT d.outcome, d.code, d.tenant, d.seq INTO outcome, code, audit_tenant, audit_seq;
        RETURN;
    END IF;
    FOR o IN SELECT * FROM opsdesk.operations WHERE id = ANY (ids) ORDER BY id LOOP
        IF o.held = p_hold THEN
            unchanged := unchanged + 1;
            CONTINUE;
        END IF;
        UPDATE opsdesk.operations SET held = p_hold WHERE id = o.id;
        a.details := NULL;
        a.operation_id := NULL;
        a := opsdesk.about(a, o);
        a.outcome := 'succeeded';
        PERFORM opsdesk.audit_append(a);
        changed := changed + 1;
    END LOOP;
    outcome := 'succeeded';
END
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.may_purge() OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_refused(opsdesk.decision_result, bigint) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.tool_name_problem(text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.tombstone_policy_problem(jsonb) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_run_for_delete(opsdesk.audit, bigint, integer, boolean) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text, bigint, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_batch(bigint, integer) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_tombstones(bigint, integer) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.purge_finish(bigint, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.may_purge(), opsdesk.purge_refused(opsdesk.decision_result, bigint),
    opsdesk.tool_name_problem(text), opsdesk.tombstone_policy_problem(jsonb),
    opsdesk.purge_run_for_delete(opsdesk.audit, bigint, integer, boolean),
    opsdesk.purge_start(text, timestamptz, jsonb, text, bigint, text), opsdesk.purge_batch(bigint, integer),
    opsdesk.purge_tombstones(bigint, integer), opsdesk.purge_finish(bigint, text),
    opsdesk.set_hold(bigint[], boolean, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.may_purge(), opsdesk.purge_refused(opsdesk.decision_result, bigint),
    opsdesk.tool_name_problem(text), opsdesk.tombstone_policy_problem(jsonb),
    opsdesk.purge_run_for_delete(opsdesk.audit, bigint, integer, boolean)
    TO opsdesk_owner;
-- Every person may call them: they refuse all but admins (of every
-- tenant, to purge), and audit the refusal.
GRANT EXECUTE ON FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text, bigint, text),
    opsdesk.purge_batch(bigint, integer), opsdesk.purge_tombstones(bigint, integer),
    opsdesk.purge_finish(bigint, text), opsdesk.set_hold(bigint[], boolean, text, text)
    TO opsdesk_viewer;

-- Row-level security: purge runs count records per tenant and carry their
-- reasons, for admins of every tenant only (SELECT is granted to
-- opsdesk_admin), and for the functions acting for them.
ALTER TABLE opsdesk.purge_runs ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE opsdesk.purge_batches ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY people ON opsdesk.purge_runs TO opsdesk_admin, opsdesk_owner
    USING ((SELECT opsdesk.sees_every_tenant())) WITH CHECK ((SELECT opsdesk.sees_every_tenant()));
CREATE POLICY people ON opsdesk.purge_batches TO opsdesk_admin, opsdesk_owner
    USING ((SELECT opsdesk.sees_every_tenant())) WITH CHECK ((SELECT opsdesk.sees_every_tenant()));
-- The migrating role owns the tables; FORCE applies to it too.
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('CREATE POLICY migrator ON opsdesk.purge_runs TO %I USING (true) WITH CHECK (true)', current_user);
    EXECUTE format('CREATE POLICY migrator ON opsdesk.purge_batches TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;
-- +goose StatementEnd
