-- The reconciler (issue 23 §1): decisions the evidence makes, made by a
-- machine's login, audited like a person's.
--
-- A login granted the reconciler level (opsdesk access grant NAME --as
-- reconciler) is a member of opsdesk_reconciler, which holds
-- opsdesk_viewer (it reads what it decides) and nothing of
-- opsdesk_operator: acknowledging, revealing, holding, purging and
-- granting all refuse it already. decide, the one people's function it
-- may call, lets it do exactly this and nothing else:
--   - completed on a found lookup (with the evidence digest and the
--     reference found) or not-executed on a not_found lookup: never
--     failed, defer, force, override, or a stored result; a retention
--     shorter than the tool's recorded one (7 days when none is) is
--     raised to it;
--   - only when the allowlist (opsdesk.auto_reconcile) lets that lookup
--     answer settle the record's tool, and not while the reconciler is
--     paused (opsdesk.reconciler_pause);
--   - on a pending record whose lease expired, at the version it saw (as
--     for anyone), not under hold, without unreviewed conflicting
--     attempts, and not deferred by a person at its version: those are
--     refused as 'for_people'.
-- Its decisions carry details.reconciler = true.
--
-- The attacker's view. The allowlist and the pause are not in
-- tool_policies, which service logins write (record_tool_policy): a
-- compromised service could otherwise let a reconciler release its own
-- charges. Nobody has a privilege on either table but reading (people's
-- roles); set_auto_reconcile and set_reconciler_pause, SECURITY DEFINER
-- functions, write them for an admin of every tenant, require a reason and
-- audit every attempt on the '' chain. A reconciler's tenants are its
-- access rows like anyone's: a one-tenant reconciler sees, and decides,
-- that tenant's records only.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'opsdesk_reconciler') THEN
        CREATE ROLE opsdesk_reconciler NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- another database's migration created it
END
$$;
-- +goose StatementEnd

-- Memberships, once per cluster, as in migration 00005.
-- +goose StatementBegin
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT * FROM (VALUES
        ('opsdesk_viewer', 'opsdesk_reconciler', false),
        ('opsdesk_reconciler', 'opsdesk_owner', true)) AS v(grp, member, admin)
    LOOP
        IF NOT EXISTS (
            SELECT FROM pg_auth_members m
            WHERE m.roleid = g.grp::regrole AND m.member = g.member::regrole AND (m.admin_option OR NOT g.admin)) THEN
            EXECUTE format('GRANT %I TO %I', g.grp, g.member) || CASE WHEN g.admin THEN ' WITH ADMIN OPTION' ELSE '' END;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- The tools whose records a reconciler may decide, and on which lookup
-- answers. Not per tenant: a tool is the same code for every tenant.
CREATE TABLE opsdesk.auto_reconcile (
    tool     text        NOT NULL,
    verdicts text[]      NOT NULL,
    reason   text        NOT NULL,
    set_by   text        NOT NULL,
    set_at   timestamptz NOT NULL,
    CONSTRAINT auto_reconcile_pkey PRIMARY KEY (tool),
    CONSTRAINT auto_reconcile_tool CHECK (octet_length(tool) BETWEEN 1 AND 128 AND tool !~ '[[:cntrl:]]'),
    CONSTRAINT auto_reconcile_verdicts CHECK (cardinality(verdicts) BETWEEN 1 AND 2
        AND verdicts <@ ARRAY['found', 'not_found'] AND array_position(verdicts, NULL) IS NULL)
);
GRANT SELECT ON opsdesk.auto_reconcile TO opsdesk_viewer;
GRANT SELECT, INSERT, UPDATE, DELETE ON opsdesk.auto_reconcile TO opsdesk_owner;

-- The kill switch: one row, paused or not, and who said so, when and why.
CREATE TABLE opsdesk.reconciler_pause (
    one    boolean     NOT NULL DEFAULT true,
    paused boolean     NOT NULL,
    reason text,
    set_by text        NOT NULL,
    set_at timestamptz NOT NULL,
    CONSTRAINT reconciler_pause_pkey PRIMARY KEY (one),
    CONSTRAINT reconciler_pause_one CHECK (one)
);
INSERT INTO opsdesk.reconciler_pause (paused, set_by, set_at) VALUES (false, current_user, now());
GRANT SELECT ON opsdesk.reconciler_pause TO opsdesk_viewer;
GRANT SELECT, UPDATE ON opsdesk.reconciler_pause TO opsdesk_owner;

-- set_auto_reconcile lets a reconciler decide p_tool's records on the
-- lookup answers p_verdicts (found, not_found); NULL or none: on no answer.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.set_auto_reconcile(p_tool text, p_verdicts text[], p_reason text, p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
DECLARE
    a       opsdesk.audit;
    v       text[];
    problem text := opsdesk.tool_name_problem(p_tool);
    before  text[];
BEGIN
    a.tenant := '';
    a.action := 'reconciler:allow';
    a.reason := opsdesk.clean_input(p_reason);
    a.display_name := opsdesk.clean_input(p_display_name);
    a.details := jsonb_strip_nulls(jsonb_build_object('tool', left(p_tool, 128),
        'verdicts', (SELECT to_jsonb(array_agg(left(x, 40))) FROM unnest(p_verdicts[1:10]) x)));
    IF NOT opsdesk.may_purge() THEN
        RETURN opsdesk.refuse(a, 'not_permitted', quote_ident(session_user)
            || ' may not set what the reconciler decides: it needs opsdesk_admin and every tenant');
    ELSIF a.reason IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a reason is required');
    ELSIF octet_length(a.reason) > 2000 OR octet_length(a.display_name) > 200 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'the reason is limited to 2000 bytes, the display name to 200');
    ELSIF problem IS NOT NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', problem);
    ELSIF cardinality(p_verdicts) > 2 OR array_position(p_verdicts, NULL) IS NOT NULL
       OR NOT coalesce(p_verdicts, '{}') <@ ARRAY['found', 'not_found'] THEN
        RETURN opsdesk.refuse(a, 'invalid', 'the verdicts a reconciler may act on are found and not_found, not '
            || opsdesk.cut(coalesce(array_to_string(p_verdicts[1:10], ', ', 'NULL'), 'NULL'), 200));
    END IF;
    v := ARRAY(SELECT DISTINCT x FROM unnest(p_verdicts) x ORDER BY x);
    SELECT verdicts INTO before FROM opsdesk.auto_reconcile WHERE tool = p_tool FOR UPDATE;
    IF cardinality(v) = 0 THEN
        DELETE FROM opsdesk.auto_reconcile WHERE tool = p_tool;
    ELSE
        INSERT INTO opsdesk.auto_reconcile (tool, verdicts, reason, set_by, set_at)
        VALUES (p_tool, v, a.reason, session_user, now())
        ON CONFLICT (tool) DO UPDATE SET verdicts = EXCLUDED.verdicts, reason = EXCLUDED.reason,
            set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at;
    END IF;
    a.tool := p_tool;
    a.details := a.details || jsonb_build_object('verdicts', to_jsonb(v), 'before', to_jsonb(coalesce(before, '{}')));
    a.outcome := 'succeeded';
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, NULL, NULL)::opsdesk.decision_result;
EXCEPTION WHEN lock_not_available THEN
    RETURN opsdesk.refuse(a, 'busy', SQLERRM);
END
$$;
-- +goose StatementEnd
ALTER FUNCTION opsdesk.set_auto_reconcile(text, text[], text, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.set_auto_reconcile(text, text[], text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.set_auto_reconcile(text, text[], text, text) TO opsdesk_viewer;

-- set_reconciler_pause pauses (p_paused) or resumes every reconciler:
-- decide refuses a reconciler's decision while it is paused.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.set_reconciler_pause(p_paused boolean, p_reason text, p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
DECLARE
    a opsdesk.audit;
    was boolean;
BEGIN
    a.tenant := '';
    a.action := 'reconciler:' || CASE WHEN p_paused THEN 'pause' WHEN NOT p_paused THEN 'resume' ELSE 'pause?' END;
    a.reason := opsdesk.clean_input(p_reason);
    a.display_name := opsdesk.clean_input(p_display_name);
    -- Every tenant's reconcilers stop or go: an admin of every tenant
    -- decides it, as for the allowlist. (A one-tenant admin could pause
    -- every tenant's, and by holding the pause row's lock in an open
    -- transaction keep every other admin from pausing or resuming.)
    IF NOT pg_has_role(session_user, 'opsdesk_admin', 'MEMBER') OR NOT opsdesk.sees_every_tenant() THEN
        RETURN opsdesk.refuse(a, 'not_permitted', quote_ident(session_user) || ' may not '
            || CASE WHEN p_paused THEN 'pause' ELSE 'resume' END || ' the reconciler: it needs opsdesk_admin and every tenant');
    ELSIF p_paused IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'paused or not: NULL is neither');
    ELSIF a.reason IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a reason is required');
    ELSIF octet_length(a.reason) > 2000 OR octet_length(a.display_name) > 200 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'the reason is limited to 2000 bytes, the display name to 200');
    END IF;
    SELECT paused INTO was FROM opsdesk.reconciler_pause FOR UPDATE;
    UPDATE opsdesk.reconciler_pause SET paused = p_paused, reason = a.reason, set_by = session_user, set_at = now();
    a.details := jsonb_build_object('was_paused', was);
    a.outcome := 'succeeded';
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, NULL, NULL)::opsdesk.decision_result;
EXCEPTION WHEN lock_not_available THEN
    RETURN opsdesk.refuse(a, 'busy', SQLERRM);
END
$$;
-- +goose StatementEnd
ALTER FUNCTION opsdesk.set_reconciler_pause(boolean, text, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.set_reconciler_pause(boolean, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.set_reconciler_pause(boolean, text, text) TO opsdesk_viewer;

-- refuse as before; a pause and a record left to people are denials.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.refuse(a opsdesk.audit, p_code text, p_message text)
 RETURNS opsdesk.decision_result
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    w     opsdesk.refusal_windows;
    t_now timestamptz := clock_timestamp();
BEGIN
    IF p_code = 'not_found' AND p_message IS NULL THEN
        p_message := 'no operation ' || coalesce(a.operation_id::text, 'NULL') || ' (or not visible to ' || quote_ident(session_user) || ')';
    END IF;
    p_message := opsdesk.cut(p_message, 1000);
    a.outcome := CASE WHEN p_code IN ('not_permitted', 'not_pending', 'lease_live', 'contradicts_lookup', 'paused', 'for_people')
                      THEN 'denied' ELSE 'failed' END;
    -- No rights to the record: not on its tenant's chain.
    IF p_code IN ('not_found', 'not_permitted') AND a.tenant <> '' THEN
        a.details := coalesce(a.details, '{}') || jsonb_build_object('tenant', a.tenant);
        a.tenant := '';
    END IF;
    a.tenant := coalesce(a.tenant, '');
    a.details := coalesce(opsdesk.cut_details(a.details, 2500), '{}')
        || jsonb_build_object('refusal', p_code, 'message', p_message);

    INSERT INTO opsdesk.refusal_windows (role, window_start) VALUES (session_user, t_now) ON CONFLICT (role) DO NOTHING;
    SELECT * INTO w FROM opsdesk.refusal_windows WHERE role = session_user FOR UPDATE;
    IF w.window_start <= t_now - interval '1 minute' THEN
        w.window_start := t_now;
        w.recorded := 0;
    END IF;
    IF w.recorded < 30 THEN
        UPDATE opsdesk.refusal_windows SET window_start = w.window_start, recorded = w.recorded + 1 WHERE role = session_user;
        a := opsdesk.audit_append(a);
        RETURN (a.outcome, p_code, p_message, a.tenant, a.entry, a.state_after, a.version_after)::opsdesk.decision_result;
    END IF;
    UPDATE opsdesk.refusal_windows
    SET window_start = w.window_start, counted = counted + 1, last_counted_at = t_now,
        by_code = by_code || jsonb_build_object(p_code, coalesce((by_code->>p_code)::bigint, 0) + 1)
    WHERE role = session_user;
    RETURN (a.outcome, p_code,
        p_message || ' (no audit record of its own: beyond 30 refusals a minute, ' || quote_ident(session_user)
            || '''s refusals are counted, and the count is audited on the '''' chain)',
        a.tenant, NULL, a.state_after, a.version_after)::opsdesk.decision_result;
END
$function$;
-- +goose StatementEnd

-- decide as before, with the reconciler's branch by its permission check.
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

-- grant_access as before, with the reconciler level.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.grant_access(p_role text, p_level text, p_tenant text, p_reason text, p_display_name text DEFAULT NULL::text)
 RETURNS opsdesk.decision_result
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET lock_timeout TO '2s'
AS $function$
DECLARE
    a      opsdesk.audit;
    lvl    text;
    target record;
BEGIN
    a.tenant := '';
    a.action := 'access:' || CASE WHEN p_level IS NULL THEN 'revoke' ELSE 'grant' END;
    a.reason := opsdesk.clean_input(p_reason);
    a.display_name := opsdesk.clean_input(p_display_name);
    a.details := jsonb_strip_nulls(jsonb_build_object('role', left(p_role, 100), 'level', left(p_level, 20),
        'tenant', left(p_tenant, 200)));
    SELECT r.oid, r.rolcanlogin, r.rolsuper INTO target FROM pg_roles r
    WHERE octet_length(p_role) <= 63 AND r.rolname = p_role;
    IF NOT pg_has_role(session_user, 'opsdesk_admin', 'MEMBER') OR NOT opsdesk.sees_every_tenant() THEN
        RETURN opsdesk.refuse(a, 'not_permitted', quote_ident(session_user) || ' may not manage access: it needs opsdesk_admin and every tenant');
    ELSIF a.reason IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a reason is required');
    ELSIF octet_length(a.reason) > 2000 OR octet_length(a.display_name) > 200 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'the reason is limited to 2000 bytes, the display name to 200');
    ELSIF target.oid IS NULL OR NOT target.rolcanlogin THEN
        RETURN opsdesk.refuse(a, 'invalid', 'no login role named exactly ' || opsdesk.quoted(p_role, 63) || ': create it first');
    ELSIF target.rolsuper
       OR pg_has_role(target.oid, 'opsdesk_service', 'MEMBER') OR pg_has_role(target.oid, 'opsdesk_owner', 'MEMBER')
       OR EXISTS (SELECT FROM pg_auth_members m WHERE m.roleid = target.oid) THEN
        RETURN opsdesk.refuse(a, 'invalid', quote_ident(p_role) || ' is not one person''s role: a superuser, a service (opsdesk_service), '
            || 'opsdesk_owner or a group with members cannot be given people''s access');
    ELSIF p_level IS NOT NULL AND p_level NOT IN ('viewer', 'operator', 'admin', 'reconciler') THEN
        RETURN opsdesk.refuse(a, 'invalid', 'unknown level ' || opsdesk.quoted(p_level, 20) || ' (viewer, operator, admin, reconciler)');
    ELSIF p_level IS NOT NULL AND opsdesk.clean_input(p_tenant) IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a tenant is required (''*'' for every tenant)');
    ELSIF p_level IS NOT NULL AND (octet_length(p_tenant) > 128 OR p_tenant ~ '[[:cntrl:]]') THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a tenant is up to 128 bytes, without control characters, not ' || opsdesk.quoted(p_tenant, 40));
    END IF;
    FOREACH lvl IN ARRAY ARRAY['viewer', 'operator', 'admin', 'reconciler'] LOOP
        IF lvl IS DISTINCT FROM p_level AND pg_has_role(target.oid, ('opsdesk_' || lvl)::name, 'MEMBER') THEN
            EXECUTE format('REVOKE %I FROM %I', 'opsdesk_' || lvl, p_role);
        END IF;
    END LOOP;
    IF p_level IS NULL THEN
        DELETE FROM opsdesk.access WHERE role = p_role;
    ELSE
        EXECUTE format('GRANT %I TO %I', 'opsdesk_' || p_level, p_role);
        INSERT INTO opsdesk.access (role, tenant, granted_by) VALUES (p_role, p_tenant, session_user)
        ON CONFLICT (role, tenant) DO UPDATE SET granted_at = now(), granted_by = session_user;
    END IF;
    a.outcome := 'succeeded';
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, NULL, NULL)::opsdesk.decision_result;
END
$function$;
-- +goose StatementEnd

-- cut_details as before, keeping the keys that say whose and which run a
-- record is (reconciler, batch, tenant) when it cuts the rest: a
-- reconciler's refusal of long references otherwise lost its mark and
-- its batch to {"cut": …}.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.cut_details(d jsonb, p_bytes integer) RETURNS jsonb
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN octet_length(d::text) <= p_bytes THEN d
                  ELSE jsonb_build_object('cut', left((d - 'reconciler' - 'batch' - 'tenant')::text, (p_bytes - 400) / 4))
                       || jsonb_strip_nulls(jsonb_build_object(
                              'reconciler', CASE WHEN jsonb_typeof(d->'reconciler') = 'boolean' THEN d->'reconciler' END,
                              'batch', CASE WHEN octet_length(d->>'batch') <= 64 THEN d->'batch' END,
                              'tenant', CASE WHEN octet_length(d->>'tenant') <= 128 THEN d->'tenant' END)) END $$;
-- +goose StatementEnd
