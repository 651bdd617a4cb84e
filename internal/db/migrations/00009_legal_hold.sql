-- Legal hold: an admin holds records (a purge never deletes a held one)
-- and releases them, with a reason; each record's change is audited on
-- its tenant's chain.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION opsdesk.set_hold(p_ids bigint[], p_hold boolean, p_reason text, p_display_name text DEFAULT NULL,
    OUT changed integer, OUT unchanged integer, OUT missing integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o opsdesk.operations;
    a opsdesk.audit;
BEGIN
    IF NOT pg_has_role(session_user, 'opsdesk_admin', 'MEMBER') THEN
        RAISE EXCEPTION '% may not hold records: it is not granted opsdesk_admin', session_user
            USING ERRCODE = 'insufficient_privilege';
    ELSIF nullif(btrim(p_reason), '') IS NULL OR octet_length(p_reason) > 2000 OR octet_length(p_display_name) > 200 THEN
        RAISE EXCEPTION 'a reason (up to 2000 bytes) is required' USING ERRCODE = 'invalid_parameter_value';
    ELSIF p_hold IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'hold or release up to 10000 records at a time' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    changed := 0;
    unchanged := 0;
    -- Row-level security: records of tenants the admin does not see are
    -- missing.
    missing := coalesce(cardinality(p_ids), 0) - (SELECT count(*) FROM opsdesk.operations WHERE id = ANY (p_ids));
    FOR o IN SELECT * FROM opsdesk.operations WHERE id = ANY (p_ids) ORDER BY id FOR UPDATE LOOP
        IF o.held = p_hold THEN
            unchanged := unchanged + 1;
            CONTINUE;
        END IF;
        UPDATE opsdesk.operations SET held = p_hold WHERE id = o.id;
        a := NULL;
        a.action := CASE WHEN p_hold THEN 'hold:set' ELSE 'hold:release' END;
        a.reason := btrim(p_reason);
        a.display_name := p_display_name;
        a := opsdesk.about(a, o);
        a.outcome := 'succeeded';
        a := opsdesk.audit_append(a);
        changed := changed + 1;
    END LOOP;
END
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) TO opsdesk_viewer;
