-- Batches you can see (issue 22 §2).
--
-- A bulk run (opsdesk resolve --by-lookup, R in the console) and each
-- reconciler pass that decides pass a batch id to decide, which keeps it
-- in the audit record's details (migration 00020). Until now the id was
-- the caller's choice and nothing else of the run was kept:
--   - any decider could pass another person's batch id and join its
--     decisions to that run;
--   - the filter the run was planned from was nowhere;
--   - audit batches aggregated every decision carrying a batch, on each
--     page, since no index held details->>'batch'.
--
-- A run is now a row of opsdesk.batches, written only by start_batch (a
-- SECURITY DEFINER function): the database picks the id, the starter is
-- session_user, and the filter is required, cut to 1000 bytes and free of
-- control characters. decide refuses (audited, as its other refusals are)
-- a batch that does not exist, that was recorded before this migration, or
-- that another login started; such a refusal keeps the id it was given as
-- details.claimed_batch, never as details.batch, so that it counts in no
-- run. Runs are listed from this table (keyset by started_at, id) with
-- each run's counts read through an index of the audit by batch.
--
-- Who sees a run: its starter; a role of every tenant; and a role that
-- sees at least one of its audit records (row-level security on the audit
-- decides which), which then sees that part of its counts only: a
-- one-tenant viewer sees nothing of a run that decided only other
-- tenants' records, not even its filter.

-- +goose Up

-- A record's batch, and a run's id as text, as LEAKPROOF functions: under
-- the audit's row-level security the planner runs a condition ahead of
-- the policy, as an index condition, only if every function in it is
-- leakproof, and ->> and uuid's text are not (they are declared so
-- because they could raise on other input; these cannot: ->> of any jsonb
-- is a text or NULL). Without them audit batches read every batched
-- record once for each run on a page (review of issue 22 §2: 50 scans of
-- the audit for a page of 50). PL/pgSQL, so that the planner does not
-- inline them and lose the mark. Only a superuser may mark a function
-- leakproof: a schema installed by the database's owner (opsmigrate
-- without a superuser) gets them unmarked, correct and slower, and doctor
-- says so.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.batch_of(d jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN d->>'batch'; END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION opsdesk.uuid_text(u uuid) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN u::text; END $$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
BEGIN
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        ALTER FUNCTION opsdesk.batch_of(jsonb) LEAKPROOF;
        ALTER FUNCTION opsdesk.uuid_text(uuid) LEAKPROOF;
    END IF;
END
$$;
-- +goose StatementEnd

CREATE TABLE opsdesk.batches (
    id           uuid        NOT NULL DEFAULT gen_random_uuid(),
    role         text        NOT NULL DEFAULT session_user,
    display_name text,
    -- NULL only for the runs recorded before this migration (below).
    filter       text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT batches_pkey PRIMARY KEY (id),
    CONSTRAINT batches_filter CHECK (octet_length(filter) BETWEEN 1 AND 1000 AND filter !~ '[[:cntrl:]]'),
    CONSTRAINT batches_display_name CHECK (octet_length(display_name) <= 200)
);
CREATE INDEX batches_started_idx ON opsdesk.batches (started_at, id);
ALTER TABLE opsdesk.batches ENABLE ROW LEVEL SECURITY;
ALTER TABLE opsdesk.batches FORCE ROW LEVEL SECURITY;
-- Nobody updates or deletes a run: the table's owner (the migrator) only.
GRANT SELECT ON opsdesk.batches TO opsdesk_viewer;
GRANT SELECT, INSERT ON opsdesk.batches TO opsdesk_owner;
CREATE POLICY migrator ON opsdesk.batches TO postgres USING (true) WITH CHECK (true);
CREATE POLICY functions ON opsdesk.batches TO opsdesk_owner USING (true) WITH CHECK (true);
CREATE POLICY people ON opsdesk.batches FOR SELECT TO opsdesk_viewer USING (
    role = session_user OR (SELECT opsdesk.sees_every_tenant())
    -- The audit's own row-level security applies inside: a record of a
    -- tenant the role may not see does not make the run visible.
    OR EXISTS (SELECT FROM opsdesk.audit a WHERE opsdesk.batch_of(a.details) = opsdesk.uuid_text(batches.id)));

-- A run's audit records, by batch: the counts of audit batches and the
-- audit filter batch:ID. Partial: most records carry no batch. tenant
-- second so that the audit's row-level security narrows inside the index.
CREATE INDEX audit_batch_idx ON opsdesk.audit (opsdesk.batch_of(details), tenant) INCLUDE (at)
    WHERE opsdesk.batch_of(details) IS NOT NULL;

-- The runs decided before this migration, so that they still list: by
-- their first record's role and display name, at their first record's
-- time, with no filter (it was never recorded). decide refuses to add to
-- them.
INSERT INTO opsdesk.batches (id, role, display_name, filter, started_at)
SELECT x.batch::uuid, (array_agg(x.role ORDER BY x.at))[1], (array_agg(x.display_name ORDER BY x.at))[1], NULL, min(x.at)
FROM (SELECT details->>'batch' AS batch, role, display_name, at FROM opsdesk.audit WHERE (details->>'batch') IS NOT NULL
      UNION ALL
      SELECT details->>'batch', role, display_name, at FROM opsdesk.audit_queue WHERE (details->>'batch') IS NOT NULL) x
WHERE x.batch ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
GROUP BY x.batch::uuid;

-- start_batch records a run about to decide and returns its id, the one
-- its decisions pass to decide. p_filter is what the run was planned
-- from (a bulk run's filter; a reconciler pass's tools), 1 to 1000 bytes
-- without control characters. Operators and reconcilers, whoever may
-- decide, may start one. A refusal is an error (SQLSTATE 42501: may not;
-- 22023: bad input) and leaves nothing behind: a run that never started
-- decided nothing.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.start_batch(p_filter text, p_display_name text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f    text;
    name text;
    id   uuid;
BEGIN
    -- As decide lets them (a service is neither: grant_access refuses it
    -- people's levels).
    IF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') AND NOT pg_has_role(session_user, 'opsdesk_reconciler', 'MEMBER') THEN
        RAISE EXCEPTION '% may not start a run: deciding needs opsdesk_operator or opsdesk_reconciler', quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Lengths first: the cleaning below is not to run over 32 MiB.
    IF octet_length(p_filter) > 1000 THEN
        RAISE EXCEPTION 'a run''s filter is limited to 1000 bytes, not %', octet_length(p_filter)
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF octet_length(p_display_name) > 200 THEN
        RAISE EXCEPTION 'the display name is limited to 200 bytes, not %', octet_length(p_display_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    f := opsdesk.clean_input(p_filter);
    name := opsdesk.clean_input(p_display_name);
    IF f IS NULL THEN
        RAISE EXCEPTION 'a run needs the filter it was planned from: % is empty', CASE WHEN p_filter IS NULL THEN 'NULL' ELSE 'the filter' END
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF f ~ '[[:cntrl:]]' OR name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'a run''s filter and display name may not hold control characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO opsdesk.batches (role, display_name, filter) VALUES (session_user, name, f) RETURNING batches.id INTO id;
    RETURN id;
END
$$;
-- +goose StatementEnd
ALTER FUNCTION opsdesk.start_batch(text, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.start_batch(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.start_batch(text, text) TO opsdesk_viewer;

-- decide as before, refusing a batch that start_batch did not start for the session's login.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.decide(p_id bigint, p_decision text, p_expect_version bigint, p_reason text, p_result_ref text DEFAULT NULL::text, p_result jsonb DEFAULT NULL::jsonb, p_evidence_digest text DEFAULT NULL::text, p_evidence_summary text DEFAULT NULL::text, p_lookup text DEFAULT NULL::text, p_force boolean DEFAULT false, p_override boolean DEFAULT false, p_retention interval DEFAULT '7 days'::interval, p_snooze_until timestamp with time zone DEFAULT NULL::timestamp with time zone, p_display_name text DEFAULT NULL::text, p_lookup_ref text DEFAULT NULL::text, p_batch uuid DEFAULT NULL::uuid)
 RETURNS opsdesk.decision_result
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET lock_timeout TO '2s'
AS $function$
DECLARE
    o          opsdesk.operations;
    a          opsdesk.audit;
    code       text;
    msg        text;
    live       boolean;
    pass       integer;
    ref        text := opsdesk.clean_input(p_result_ref);
    lookup_ref text := opsdesk.clean_input(p_lookup_ref);
    -- A reconciler's login decides what the allowlist lets a lookup settle,
    -- and nothing else (migration 00027). pg_has_role is true of every
    -- role for a superuser, who is no reconciler.
    machine    boolean := pg_has_role(session_user, 'opsdesk_reconciler', 'MEMBER')
        AND NOT coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = session_user), false);
    allowed    text[];
    halt       opsdesk.reconciler_pause;
    run        opsdesk.batches;
BEGIN
    a.action := 'decide:' || left(coalesce(p_decision, ''), 40);
    a.reason := opsdesk.clean_input(p_reason);
    a.display_name := opsdesk.clean_input(p_display_name);
    a.evidence_digest := p_evidence_digest;
    a.evidence_summary := opsdesk.clean_input(p_evidence_summary);
    a.forced := coalesce(p_force, false);
    a.override := coalesce(p_override, false);
    a.operation_id := p_id;
    a.details := jsonb_strip_nulls(jsonb_build_object('expect_version', p_expect_version,
        'lookup', left(p_lookup, 40), 'lookup_ref', left(lookup_ref, 500), 'result_ref', left(ref, 500),
        'snooze_until', p_snooze_until, 'retention', p_retention::text,
        -- What retries will be answered with, as stored.
        'result_sha256', encode(sha256(convert_to(p_result::text, 'UTF8')), 'hex'),
        -- The bulk run the decision belongs to, refused or not.
        'batch', p_batch));
    IF machine THEN
        -- Marks a machine's decision (and refusal) for the console and the trail.
        a.details := a.details || jsonb_build_object('reconciler', true);
    END IF;

    IF p_id IS NULL OR p_id < 1 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'an operation id is a whole number from 1 up, not ' || coalesce(p_id::text, 'NULL'));
    END IF;
    -- A run's decisions are its starter's (migration 00029): a batch is
    -- one start_batch made for this login. A refused one is kept as
    -- claimed_batch, so that the refusal counts in nobody's run.
    IF p_batch IS NOT NULL THEN
        SELECT * INTO run FROM opsdesk.batches b WHERE b.id = p_batch;
        IF run.id IS NULL OR run.filter IS NULL OR run.role IS DISTINCT FROM session_user THEN
            a.details := (a.details - 'batch') || jsonb_build_object('claimed_batch', p_batch);
        END IF;
        IF run.id IS NULL THEN
            RETURN opsdesk.refuse(a, 'invalid', 'no run has batch id ' || p_batch || ': a run''s id comes from opsdesk.start_batch');
        ELSIF run.filter IS NULL THEN
            RETURN opsdesk.refuse(a, 'invalid', 'batch ' || p_batch || ' is a run recorded before runs were started (migration 00029): '
                || 'nothing more is decided under it; start a new run');
        ELSIF run.role IS DISTINCT FROM session_user THEN
            RETURN opsdesk.refuse(a, 'not_permitted', 'batch ' || p_batch || ' is another login''s run: '
                || quote_ident(session_user) || ' decides under the runs it started (opsdesk.start_batch)');
        END IF;
    END IF;
    FOR pass IN 1..2 LOOP
        BEGIN
            o := opsdesk.subject(p_id, pass = 2);
            IF o.id IS NULL THEN
                code := 'not_found';
            ELSE
                a := opsdesk.about(a, o);
                live := o.state = 'pending' AND o.lease_expires_at > now();
            END IF;
            IF code IS NOT NULL THEN
                NULL;
            ELSIF NOT machine AND NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
                code := 'not_permitted';
                msg := quote_ident(session_user) || ' may not decide: it is not granted opsdesk_operator';
            ELSIF machine AND (a.forced OR a.override) THEN
                code := 'not_permitted';
                msg := quote_ident(session_user) || ' is a reconciler: it may not force or override (a live lease or a '
                    || 'contradicting lookup is for people)';
            ELSIF machine AND p_decision IS DISTINCT FROM 'completed' AND p_decision IS DISTINCT FROM 'not-executed' THEN
                code := 'not_permitted';
                msg := quote_ident(session_user) || ' is a reconciler: it decides completed (found) or not-executed (not found), not '
                    || opsdesk.quoted(p_decision, 40);
            ELSIF machine AND p_lookup IS DISTINCT FROM (CASE p_decision WHEN 'completed' THEN 'found' ELSE 'not_found' END) THEN
                code := 'not_permitted';
                msg := quote_ident(session_user) || ' is a reconciler: it decides only what a lookup answered (completed on found, '
                    || 'not-executed on not_found), not ' || p_decision || ' on ' || coalesce(opsdesk.quoted(p_lookup, 40), 'no lookup');
            ELSIF machine AND (opsdesk.clean_input(p_evidence_digest) IS NULL OR p_evidence_digest ~ '[[:cntrl:]]'
                               OR (p_lookup = 'found' AND lookup_ref IS NULL)) THEN
                code := 'not_permitted';
                msg := quote_ident(session_user) || ' is a reconciler: it must give the lookup''s evidence digest, and on found '
                    || 'the reference the lookup found';
            ELSIF machine AND p_result IS NOT NULL THEN
                code := 'not_permitted';
                msg := quote_ident(session_user) || ' is a reconciler: it may not store a result for retries to replay';
            END IF;
            IF code IS NULL AND machine AND p_retention IS NOT NULL THEN
                -- A reconciler keeps the record at least its tool's recorded
                -- retention (7 days when none is): a shorter one would let a
                -- purge, then a retry that executes again, undo what the
                -- evidence settled. Raised, not refused, so that a
                -- reconciler's catalog behind the service's does not stop
                -- every decision of the tool.
                p_retention := greatest(p_retention, coalesce((SELECT p.retention_us * interval '1 microsecond'
                                                               FROM opsdesk.tool_policies p WHERE p.tool = o.tool), interval '7 days'));
                a.details := a.details || jsonb_build_object('retention', p_retention::text);
            END IF;
            IF code IS NULL AND machine THEN
                SELECT verdicts INTO allowed FROM opsdesk.auto_reconcile WHERE tool = o.tool;
                SELECT * INTO halt FROM opsdesk.reconciler_pause;
                IF NOT coalesce(p_lookup = ANY (allowed), false) THEN
                    code := 'not_permitted';
                    msg := 'the reconciler''s allowlist does not let ' || opsdesk.quoted(o.tool, 100) || ' be decided on '
                        || p_lookup || ' (it allows ' || coalesce(array_to_string(allowed, ', '), 'nothing') || '): an admin runs '
                        || 'opsdesk reconciler allow';
                ELSIF halt.paused IS NULL THEN
                    -- No pause row (only the tables' owner could delete it):
                    -- a machine decides nothing it cannot tell it may.
                    code := 'paused';
                    msg := 'the reconciler''s pause state is missing from opsdesk.reconciler_pause: nothing is decided until it is back';
                ELSIF halt.paused THEN
                    code := 'paused';
                    msg := 'the reconciler is paused (by ' || quote_ident(halt.set_by) || ' at ' || halt.set_at || ': '
                        || opsdesk.quoted(halt.reason, 200) || '): an admin resumes it with opsdesk reconciler resume';
                END IF;
            END IF;
            IF code IS NOT NULL THEN
                NULL;
            ELSIF octet_length(a.display_name) > 200 OR octet_length(p_evidence_digest) > 200
               OR octet_length(ref) > 500 OR octet_length(lookup_ref) > 500 OR octet_length(p_result::text) > 65536 THEN
                code := 'invalid';
                msg := 'too long: the display name and evidence digest are limited to 200 bytes, the result reference '
                    || 'and the lookup''s reference to 500, the result to 64 KiB';
            ELSIF p_decision IS NULL OR p_decision NOT IN ('completed', 'not-executed', 'failed', 'defer') THEN
                code := 'invalid';
                msg := 'unknown decision ' || opsdesk.quoted(p_decision, 40) || ' (completed, not-executed, failed, defer)';
            ELSIF a.reason IS NULL THEN
                code := 'invalid';
                msg := 'a reason is required';
            ELSIF octet_length(a.reason) > 2000 OR octet_length(a.evidence_summary) > 2000 THEN
                code := 'invalid';
                msg := 'the reason and the evidence summary are limited to 2000 bytes each';
            ELSIF p_lookup IS NOT NULL AND p_lookup NOT IN ('found', 'not_found') THEN
                code := 'invalid';
                msg := 'unknown lookup answer ' || opsdesk.quoted(p_lookup, 40) || ' (found, not_found)';
            ELSIF p_expect_version IS NULL OR p_expect_version < 1 THEN
                code := 'invalid';
                msg := 'the version you saw is a whole number from 1 up, not ' || coalesce(p_expect_version::text, 'NULL');
            ELSIF p_retention IS NULL OR p_retention < interval '1 minute' OR p_retention > interval '100 years' THEN
                code := 'invalid';
                msg := 'the retention must be between 1 minute and 100 years, not ' || coalesce(p_retention::text, 'NULL');
            ELSIF p_decision = 'completed' AND ref IS NULL THEN
                code := 'invalid';
                msg := 'confirming completed needs the provider''s result reference';
            ELSIF p_decision = 'defer' AND (p_snooze_until IS NULL OR p_snooze_until <= now()
                                            OR p_snooze_until > now() + interval '1 year') THEN
                code := 'invalid';
                msg := 'defer needs a snooze time in the future, at most a year ahead, not ' || coalesce(p_snooze_until::text, 'NULL');
            ELSIF p_expect_version IS DISTINCT FROM o.version THEN
                code := 'changed';
                msg := 'changed since you looked: now version ' || o.version || ' (' || a.state_before || '), you saw version ' ||
                    p_expect_version;
            ELSIF o.state <> 'pending' THEN
                code := 'not_pending';
                msg := 'the record is ' || a.state_before || ', not pending: there is nothing to decide';
            ELSIF live AND p_decision <> 'defer' AND NOT a.forced THEN
                code := 'lease_live';
                -- A lease a superuser made endless (or restored so) is live too.
                msg := 'the lease is live (' || CASE WHEN isfinite(o.lease_expires_at)
                    THEN 'it expires in ' || date_trunc('second', o.lease_expires_at - now()) ELSE 'it never expires' END ||
                    ', held by ' || opsdesk.cut(o.owner, 200) || '): deciding needs force';
            ELSIF NOT a.override AND ((p_lookup = 'found' AND p_decision IN ('not-executed', 'failed'))
                                   OR (p_lookup = 'not_found' AND p_decision = 'completed')) THEN
                code := 'contradicts_lookup';
                msg := 'the lookup says ' || replace(p_lookup, '_', ' ') || ', which contradicts ' || p_decision ||
                    ': deciding needs override';
            ELSIF NOT a.override AND p_lookup = 'found' AND lookup_ref IS NOT NULL AND p_decision = 'completed'
                  AND ref IS DISTINCT FROM lookup_ref THEN
                code := 'contradicts_lookup';
                msg := 'the lookup found reference ' || opsdesk.quoted(lookup_ref, 100) || ', which contradicts completed with reference '
                    || opsdesk.quoted(ref, 100) || ': deciding needs override';
            ELSIF machine AND o.held THEN
                code := 'for_people';
                msg := 'the record is under legal hold: left to people';
            ELSIF machine AND EXISTS (SELECT FROM opsdesk.conflicts c
                                      WHERE c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key AND c.reviewed_at IS NULL) THEN
                code := 'for_people';
                msg := 'the record has conflicting attempts nobody reviewed: left to people';
            ELSIF machine AND (EXISTS (SELECT FROM opsdesk.audit x
                                       WHERE x.tenant = o.tenant AND x.operation_id = o.id AND x.action = 'decide:defer'
                                         AND x.outcome = 'succeeded' AND x.version_after = o.version)
                            OR EXISTS (SELECT FROM opsdesk.audit_queue x
                                       WHERE x.tenant = o.tenant AND x.operation_id = o.id AND x.action = 'decide:defer'
                                         AND x.outcome = 'succeeded' AND x.version_after = o.version)) THEN
                code := 'for_people';
                msg := 'a person deferred the record at this version: left to people';
            END IF;
            IF code IS NOT NULL AND pass = 2 THEN
                -- Let the row go before refusing.
                RAISE EXCEPTION 'refused after locking' USING ERRCODE = 'OPS01';
            END IF;
        EXCEPTION WHEN SQLSTATE 'OPS01' THEN
            NULL;
        WHEN lock_not_available THEN
            code := 'busy';
            msg := SQLERRM;
        END;
        IF code IS NOT NULL THEN
            RETURN opsdesk.refuse(a, code, msg);
        END IF;
    END LOOP;

    IF p_decision = 'completed' THEN
        UPDATE opsdesk.operations
        SET state = 'completed', outcome = 'succeeded', result = coalesce(p_result, 'null'::jsonb),
            result_ref = ref, completed_at = now(), expires_at = now() + p_retention,
            updated_at = now(), version = version + 1
        WHERE id = p_id RETURNING * INTO o;
    ELSIF p_decision = 'failed' THEN
        UPDATE opsdesk.operations
        SET state = 'completed', outcome = 'rejected',
            result = coalesce(p_result, jsonb_build_object('error', 'marked failed by an operator')),
            completed_at = now(), expires_at = now() + p_retention, updated_at = now(), version = version + 1
        WHERE id = p_id RETURNING * INTO o;
    ELSIF p_decision = 'not-executed' THEN
        UPDATE opsdesk.operations
        SET state = 'released', updated_at = now(), version = version + 1
        WHERE id = p_id RETURNING * INTO o;
    END IF;
    a.outcome := 'succeeded';
    a.state_after := opsdesk.view_state(o);
    a.version_after := o.version;
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, a.state_after, o.version)::opsdesk.decision_result;
END
$function$;

-- +goose StatementEnd

-- cut_details as 00027's, keeping claimed_batch too: a refusal of
-- another login's run whose details were cut lost the id it claimed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.cut_details(d jsonb, p_bytes integer) RETURNS jsonb
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN octet_length(d::text) <= p_bytes THEN d
                  ELSE jsonb_build_object('cut', left((d - 'reconciler' - 'batch' - 'claimed_batch' - 'tenant')::text, (p_bytes - 400) / 4))
                       || jsonb_strip_nulls(jsonb_build_object(
                              'reconciler', CASE WHEN jsonb_typeof(d->'reconciler') = 'boolean' THEN d->'reconciler' END,
                              'batch', CASE WHEN octet_length(d->>'batch') <= 64 THEN d->'batch' END,
                              'claimed_batch', CASE WHEN octet_length(d->>'claimed_batch') <= 64 THEN d->'claimed_batch' END,
                              'tenant', CASE WHEN octet_length(d->>'tenant') <= 128 THEN d->'tenant' END)) END $$;
-- +goose StatementEnd
