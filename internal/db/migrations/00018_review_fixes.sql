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

-- +goose Up

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
    found bigint[];
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
    -- The records' gates before their rows, as a decision takes them
    -- (opsdesk.subject), in bucket order so that two holds never wait for
    -- each other crosswise: a hold left open is then a holder the next
    -- decision on one of its records ends, not a row lock it waits on.
    FOR bucket IN SELECT DISTINCT hashint8(i) & 4095 FROM unnest(ids) i ORDER BY 1 LOOP
        PERFORM opsdesk.gate(2::smallint, bucket, 'the records of a hold');
    END LOOP;
    -- Locked first, then compared: a record purged meanwhile is missing,
    -- not silently skipped. Row-level security: records of tenants the
    -- admin does not see are missing too.
    found := ARRAY(SELECT id FROM opsdesk.operations WHERE id = ANY (ids) ORDER BY id FOR UPDATE);
    missing := ARRAY(SELECT i FROM unnest(ids) i WHERE i <> ALL (found) ORDER BY i);
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
    missing := '{}';
    FOR o IN SELECT * FROM opsdesk.operations WHERE id = ANY (found) ORDER BY id LOOP
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

ALTER FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) TO opsdesk_viewer;
ALTER FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text, bigint, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.purge_start(text, timestamptz, jsonb, text, bigint, text) TO opsdesk_viewer;
