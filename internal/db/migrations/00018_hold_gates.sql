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

ALTER FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) TO opsdesk_viewer;
