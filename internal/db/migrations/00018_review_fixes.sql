-- set_hold as in migration 00017, with the records' gates taken before
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
-- purge_start as in migration 00017, with the dry run's count bounded
-- above too (at most 10^15, more records than any table holds): a resume
-- adds it to what the run purged, and a count near the bigint limit made
-- that sum raise "bigint out of range", rolling the refusal back unaudited.
--
-- Refusals lock nothing (issue 10, found by a second review). decide and
-- ack_conflicts locked their record (its gate, then its row FOR UPDATE)
-- before any check, and set_hold locked every record it could find before
-- it looked for the missing ones; a refusal kept those locks until its
-- transaction ended. A one-tenant operator's
--   SELECT (opsdesk.decide(6, 'bogus', 1, 'x')).code, pg_sleep(12)
-- made the library's conflict count on record 6 wait 11 s, and one
-- statement over every record of a tenant stalled the library in the whole
-- tenant: the library takes no gate, so nobody ended it. Now each checks
-- everything on an unlocked read first and refuses from there; only a call
-- that will write takes the gates and row locks, reads again and checks
-- again (the record may have changed meanwhile: version, state, lease,
-- conflicts reviewed, a record purged). A refusal found then is answered
-- after the locks are let go: they are taken in a block that a private
-- error (SQLSTATE OPS01) rolls back, which releases what the block locked.
-- set_hold is written below, after the others. What is left: a call
-- that writes holds its row locks until its transaction ends, as any
-- write does, and the library waits for them. One set_hold call of
-- thousands of records is such a write, seconds long, and a decision in
-- its tenant ends it after 2 s: retention.SetHold sends a large hold in
-- batches of about 0.4 s each, one transaction apiece.
--
-- The '' chain has a gate of its own (kind 1, bucket 4096). Chains' gates
-- are hashtext(tenant) & 4095, and '' shares its bucket (1645) with some
-- tenants (t11971, say): a viewer's refusals, which go to '', held that
-- tenant's chain gate, and a decision in the tenant waited for it (and
-- ended the viewer after 2 s). No tenant's bucket reaches 4096.

-- +goose Up

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

ALTER FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text, bigint, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text, bigint, text) TO opsdesk_viewer;

-- The '' chain's own gate (the header).
INSERT INTO opsdesk.gates (kind, bucket) VALUES (1, 4096) ON CONFLICT DO NOTHING;

-- chain_lock as in migration 00016, with the '' chain behind a gate no
-- tenant shares.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.chain_lock(p_tenant text) RETURNS jsonb
LANGUAGE sql SET search_path = pg_catalog, pg_temp
AS $$ SELECT opsdesk.gate(1::smallint, CASE WHEN p_tenant = '' THEN 4096 ELSE hashtext(p_tenant) & 4095 END,
    'the audit chain ' || CASE WHEN p_tenant = '' THEN '''''' ELSE opsdesk.quoted(p_tenant, 40) END) $$;
-- +goose StatementEnd

-- decide as in migration 00016, checking in two passes (the header): the
-- first on the record read unlocked, where every refusal is answered; the
-- second, for a call that will write, on the record locked (its gate, then
-- its row), inside a block that OPS01 rolls back, locks and all, when the
-- record changed meanwhile. The same checks run in both passes; only those
-- on the record (version, state, lease) can answer differently.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.decide(
    p_id bigint, p_decision text, p_expect_version bigint, p_reason text,
    p_result_ref text DEFAULT NULL, p_result jsonb DEFAULT NULL,
    p_evidence_digest text DEFAULT NULL, p_evidence_summary text DEFAULT NULL, p_lookup text DEFAULT NULL,
    p_force boolean DEFAULT false, p_override boolean DEFAULT false,
    p_retention interval DEFAULT interval '7 days', p_snooze_until timestamptz DEFAULT NULL,
    p_display_name text DEFAULT NULL, p_lookup_ref text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o          opsdesk.operations;
    a          opsdesk.audit;
    code       text;
    msg        text;
    live       boolean;
    pass       integer;
    ref        text := opsdesk.clean_input(p_result_ref);
    lookup_ref text := opsdesk.clean_input(p_lookup_ref);
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
        'result_sha256', encode(sha256(convert_to(p_result::text, 'UTF8')), 'hex')));

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
            ELSIF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
                code := 'not_permitted';
                msg := quote_ident(session_user) || ' may not decide: it is not granted opsdesk_operator';
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
                msg := 'the lease is live (it expires in ' || date_trunc('second', o.lease_expires_at - now()) ||
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
            END IF;
            IF code IS NOT NULL AND pass = 2 THEN
                -- Let the gate and the row go before refusing.
                RAISE EXCEPTION 'refused after locking' USING ERRCODE = 'OPS01';
            END IF;
        EXCEPTION WHEN SQLSTATE 'OPS01' THEN
            NULL;
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
    RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, a.state_after, o.version)::opsdesk.decision_result;
END
$$;
-- +goose StatementEnd

-- ack_conflicts as in migration 00016, checking in two passes as decide
-- does: the first looks for unreviewed conflicts among those seen without
-- locking; the second, on the record locked, marks them reviewed, and a
-- second that finds none (another ack came first) lets the locks go
-- before it refuses.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.ack_conflicts(p_id bigint, p_seen bigint[], p_reason text, p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o    opsdesk.operations;
    a    opsdesk.audit;
    ids  bigint[];
    code text;
    msg  text;
    pass integer;
BEGIN
    a.action := 'conflicts:ack';
    a.reason := opsdesk.clean_input(p_reason);
    a.display_name := opsdesk.clean_input(p_display_name);
    a.operation_id := p_id;
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
            END IF;
            IF code IS NOT NULL THEN
                NULL;
            ELSIF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
                code := 'not_permitted';
                msg := quote_ident(session_user) || ' may not acknowledge conflicts: it is not granted opsdesk_operator';
            ELSIF octet_length(a.display_name) > 200 THEN
                code := 'invalid';
                msg := 'the display name is limited to 200 bytes';
            ELSIF a.reason IS NULL THEN
                code := 'invalid';
                msg := 'a reason is required';
            ELSIF octet_length(a.reason) > 2000 THEN
                code := 'invalid';
                msg := 'the reason is limited to 2000 bytes';
            ELSIF cardinality(p_seen) > 10000 OR array_ndims(p_seen) > 1 OR array_position(p_seen, NULL) IS NOT NULL
               OR EXISTS (SELECT FROM unnest(p_seen) s WHERE s < 1) THEN
                code := 'invalid';
                msg := 'the conflicts you saw are a list of up to 10000 ids, each a whole number from 1 up';
            ELSIF pass = 1 THEN
                IF NOT EXISTS (SELECT FROM opsdesk.conflicts
                               WHERE tenant = o.tenant AND tool = o.tool AND key = o.key AND reviewed_at IS NULL
                                 AND id = ANY (p_seen)) THEN
                    code := 'no_conflicts';
                END IF;
            ELSE
                WITH reviewed AS (
                    UPDATE opsdesk.conflicts SET reviewed_at = now(), reviewed_by = session_user
                    WHERE tenant = o.tenant AND tool = o.tool AND key = o.key AND reviewed_at IS NULL AND id = ANY (p_seen)
                    RETURNING id)
                SELECT array_agg(id ORDER BY id) INTO ids FROM reviewed;
                IF ids IS NULL THEN
                    code := 'no_conflicts';
                END IF;
            END IF;
            IF code = 'no_conflicts' THEN
                msg := 'the record has no unreviewed conflicts among those you saw';
            END IF;
            IF code IS NOT NULL AND pass = 2 THEN
                -- Let the gate and the row go before refusing.
                RAISE EXCEPTION 'refused after locking' USING ERRCODE = 'OPS01';
            END IF;
        EXCEPTION WHEN SQLSTATE 'OPS01' THEN
            NULL;
        END;
        IF code IS NOT NULL THEN
            RETURN opsdesk.refuse(a, code, msg);
        END IF;
    END LOOP;
    a.outcome := 'succeeded';
    a.details := jsonb_build_object('conflicts', to_jsonb(ids[1:100]))
        || CASE WHEN cardinality(ids) > 100 THEN jsonb_build_object('count', cardinality(ids)) ELSE '{}' END;
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, a.state_after, o.version)::opsdesk.decision_result;
END
$$;
-- +goose StatementEnd

-- set_hold as in migration 00017, with the records' gates taken before
-- their rows (in bucket order), looking for missing (or invisible) records
-- on an unlocked read first and refusing from there, before any gate or
-- row is locked. Only a hold that will write takes the gates and rows; one that
-- finds a record gone meanwhile (purged) lets them go before it refuses.
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

ALTER FUNCTION opsdesk.chain_lock(text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.chain_lock(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.chain_lock(text) TO opsdesk_owner;
ALTER FUNCTION opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text, text)
    OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION
    opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text, text)
    TO opsdesk_viewer;
ALTER FUNCTION opsdesk.ack_conflicts(bigint, bigint[], text, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.ack_conflicts(bigint, bigint[], text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.ack_conflicts(bigint, bigint[], text, text) TO opsdesk_viewer;
ALTER FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) TO opsdesk_viewer;
