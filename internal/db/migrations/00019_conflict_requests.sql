-- What a conflicting attempt asked for (issue 13, section 4).
--
-- A conflict kept the two fingerprints only: an operator saw that a key was
-- reused with another request, not what differed. The library now stores
-- the refused attempt's canonical request (the RFC 8785 text of {intent,
-- tool, version} that its fingerprint hashes, bounded by
-- Config.MaxIntentBytes like every intent) in conflicts.intent, json like
-- operations.intent (migration 00018), with the privileges of that column:
-- the service may insert it and never read it back (it has SELECT on the
-- conflict's id only), viewers never see it (their SELECT names its
-- columns), and only an audited reveal gives it out.
--
-- Conflicts recorded before this migration have no request: SQL NULL. A
-- conflict inserted later without one (by a library older than schema
-- version 19, still running while the schema is migrated) gets the
-- column's default, JSON null, which no canonical request is (it is an
-- object): the reveal tells the two cases apart and says which.
--
-- The reveal of both requests is a request and a fetch, as for a record's
-- intent or result (reveal_request and reveal_fetch, migrations 00016 and
-- 00018). reveal_conflict_request checks the conflict (row-level security:
-- absent and hidden look the same), the role, the reason, and appends the
-- audit record (action reveal:conflict, about the conflict's record, the
-- conflict's id in details) in its own transaction, which commits;
-- reveal_conflict_fetch, in a transaction of its own, checks again that the
-- role is an operator who sees the conflict and gives one fetch per
-- request. It returns the original request (the record's intent), the
-- attempted one, whether each hashes to the fingerprint recorded for it
-- (so a service that wrote another request beside a fingerprint is caught),
-- and why a request is missing. The differing fields are computed by the
-- caller (reconcile.DiffRequests), not here.
--
-- reveal_fetch's checks of a request (a transaction of its own, an
-- operator, the role's own request of the last minute, one fetch) move to
-- reveal_claim and reveal_mark, which both fetches use. reveal_fetch is
-- otherwise as in migration 00018.
--
-- refuse words a refusal of a record not found only when its caller gives
-- no message: a conflict not found is named as a conflict, not as
-- "operation NULL". Every earlier caller passes NULL.
--
-- conflicts gets an index on id: a reveal names a conflict by its id, and
-- the primary key starts with the tenant, which an operator of every
-- tenant does not give. Conflicts are rare (each one is a caller's bug),
-- so the library's conflict insert pays for one more index entry seldom.

-- +goose Up
ALTER TABLE opsdesk.conflicts ADD COLUMN intent json;
ALTER TABLE opsdesk.conflicts ALTER COLUMN intent SET DEFAULT 'null'::json;
GRANT INSERT (intent) ON opsdesk.conflicts TO opsdesk_service;

CREATE INDEX conflicts_id_idx ON opsdesk.conflicts (id) INCLUDE (tenant);

-- refuse as in migration 00016, but a not_found refusal keeps the message
-- its caller gives (the header).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.refuse(a opsdesk.audit, p_code text, p_message text) RETURNS opsdesk.decision_result
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    w     opsdesk.refusal_windows;
    t_now timestamptz := clock_timestamp();
BEGIN
    IF p_code = 'not_found' AND p_message IS NULL THEN
        p_message := 'no operation ' || coalesce(a.operation_id::text, 'NULL') || ' (or not visible to ' || quote_ident(session_user) || ')';
    END IF;
    p_message := opsdesk.cut(p_message, 1000);
    a.outcome := CASE WHEN p_code IN ('not_permitted', 'not_pending', 'lease_live', 'contradicts_lookup')
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
        RETURN (a.outcome, p_code, p_message, a.tenant, a.seq, a.state_after, a.version_after)::opsdesk.decision_result;
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
$$;
-- +goose StatementEnd

-- reveal_claim finds reveal request p_tenant#p_seq, one of p_actions, for
-- a fetch: the fetch's transaction has written nothing (so the request's
-- audit record was committed by an earlier one), the role is still an
-- operator, and the request is the role's own, succeeded, at most a minute
-- old, on a chain the role still sees (row-level security). It raises
-- otherwise.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_claim(p_tenant text, p_seq bigint, p_actions text[]) RETURNS opsdesk.audit
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a opsdesk.audit;
BEGIN
    -- Before this function writes: a transaction that wrote nothing yet
    -- cannot be the request's own, whose audit record it would hold.
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'a reveal is fetched in a transaction of its own, after its request''s committed'
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    IF p_tenant IS NULL OR p_seq IS NULL OR p_seq < 1 THEN
        RAISE EXCEPTION 'a reveal is named by its audit record: a chain and a sequence number from 1 up'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        RAISE EXCEPTION '% may not reveal stored values: it is not granted opsdesk_operator', quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT * INTO a FROM opsdesk.audit
    WHERE tenant = p_tenant AND seq = p_seq AND role = session_user AND outcome = 'succeeded'
      AND action = ANY (p_actions) AND at > clock_timestamp() - interval '1 minute';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no reveal % by % in the last minute', opsdesk.reveal_name(p_tenant, p_seq), quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN a;
END
$$;
-- +goose StatementEnd

-- reveal_name names reveal request p_tenant#p_seq in a message.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_name(p_tenant text, p_seq bigint) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN p_tenant = '' THEN '' ELSE opsdesk.quoted(p_tenant, 40) END || '#' || p_seq $$;
-- +goose StatementEnd

-- reveal_mark records request a as fetched, the one write of a fetch's
-- transaction: it raises when what the request revealed is no longer
-- visible to the role (p_visible false) or when the request was fetched
-- already. A fetch whose transaction does not commit leaves the request
-- unfetched.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_mark(a opsdesk.audit, p_visible boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT coalesce(p_visible, false) THEN
        RAISE EXCEPTION 'the record of reveal % is no longer visible to %', opsdesk.reveal_name(a.tenant, a.seq), quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO opsdesk.reveal_fetches (tenant, seq, role, fetched_at)
    VALUES (a.tenant, a.seq, session_user, clock_timestamp()) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reveal % was fetched already: a reveal shows its value once; reveal it again (it is audited again)',
            opsdesk.reveal_name(a.tenant, a.seq)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;
-- +goose StatementEnd

-- reveal_fetch as in migration 00018, its checks of the request in
-- reveal_claim and reveal_mark.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.reveal_fetch(p_tenant text, p_seq bigint) RETURNS json
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a opsdesk.audit := opsdesk.reveal_claim(p_tenant, p_seq, ARRAY['reveal:intent', 'reveal:result']);
    v json;
BEGIN
    -- Row-level security: the record must still be visible.
    SELECT CASE a.action WHEN 'reveal:intent' THEN o.intent ELSE o.result END INTO v
    FROM opsdesk.operations o WHERE o.tenant = a.tenant AND o.id = a.operation_id;
    PERFORM opsdesk.reveal_mark(a, FOUND);
    RETURN v;
END
$$;
-- +goose StatementEnd

-- reveal_conflict_request audits the reveal of conflict p_conflict_id's
-- two requests (the header). Its record is about the conflict's record,
-- with the conflict's id in details.conflict.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_conflict_request(p_conflict_id bigint, p_reason text, p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
    o opsdesk.operations;
    a opsdesk.audit;
BEGIN
    a.action := 'reveal:conflict';
    a.reason := opsdesk.clean_input(p_reason);
    a.display_name := opsdesk.clean_input(p_display_name);
    a.details := jsonb_build_object('conflict', p_conflict_id);
    IF p_conflict_id IS NULL OR p_conflict_id < 1 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a conflict id is a whole number from 1 up, not ' || coalesce(p_conflict_id::text, 'NULL'));
    END IF;
    -- Row-level security: the conflict and its record as the role sees
    -- them. Neither request is read here.
    -- The original is the record of the conflict's identity (whose id
    -- conflict_needs_record, migration 00010, makes operation_id).
    SELECT x.tenant, x.tool, x.key, x.intent IS NULL OR json_typeof(x.intent) = 'null' AS missing INTO c
    FROM opsdesk.conflicts x WHERE x.id = p_conflict_id;
    IF FOUND THEN
        SELECT * INTO o FROM opsdesk.operations WHERE tenant = c.tenant AND tool = c.tool AND key = c.key;
    END IF;
    IF o.id IS NULL THEN
        RETURN opsdesk.refuse(a, 'not_found', 'no conflict ' || p_conflict_id || ' (or not visible to ' || quote_ident(session_user) || ')');
    END IF;
    a := opsdesk.about(a, o);
    IF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        RETURN opsdesk.refuse(a, 'not_permitted', quote_ident(session_user) || ' may not reveal stored values: it is not granted opsdesk_operator');
    ELSIF a.reason IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a reason is required');
    ELSIF octet_length(a.reason) > 2000 OR octet_length(a.display_name) > 200 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'the reason is limited to 2000 bytes, the display name to 200');
    ELSIF c.missing AND o.intent IS NULL THEN
        RETURN opsdesk.refuse(a, 'no_value', 'neither request of conflict ' || p_conflict_id || ' was recorded: nothing to reveal');
    END IF;
    a.outcome := 'succeeded';
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, a.state_after, o.version)::opsdesk.decision_result;
END
$$;
-- +goose StatementEnd

-- reveal_conflict_fetch returns the two requests of reveal request
-- p_tenant#p_seq (reveal_conflict_request's), once, to the role that
-- requested it within the last minute, if it is still an operator who sees
-- the conflict. A request that was not recorded is NULL and its *_missing
-- says why; *_fingerprinted tells whether a recorded one hashes to the
-- fingerprint recorded for it.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_conflict_fetch(p_tenant text, p_seq bigint)
RETURNS TABLE (original_request json, attempted_request json, original_fingerprinted boolean,
    attempted_fingerprinted boolean, original_missing text, attempted_missing text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a           opsdesk.audit := opsdesk.reveal_claim(p_tenant, p_seq, ARRAY['reveal:conflict']);
    conflict_id bigint := (a.details->>'conflict')::bigint;
    visible     boolean;
BEGIN
    -- Row-level security: the conflict and its record must still be
    -- visible.
    SELECT o.intent, CASE WHEN json_typeof(c.intent) <> 'null' THEN c.intent END,
        coalesce(sha256(convert_to(o.intent::text, 'UTF8')) = c.original_fingerprint AND o.fingerprint = c.original_fingerprint, false),
        coalesce(sha256(convert_to(c.intent::text, 'UTF8')) = c.fingerprint AND json_typeof(c.intent) <> 'null', false),
        CASE WHEN o.intent IS NULL THEN 'not recorded: operation ' || o.id || ' was created before migration 00005, '
            || 'from which opsdesk stores each record''s request' END,
        CASE WHEN c.intent IS NULL THEN 'not recorded: conflict ' || c.id || ' predates migration 00019 (schema version 19), '
                || 'before which opsdesk kept only the fingerprint of a conflicting request'
             WHEN json_typeof(c.intent) = 'null' THEN 'not recorded: conflict ' || c.id || ' was recorded by an opsdesk '
                || 'library older than schema version 19, which keeps only the fingerprint of a conflicting request' END,
        true
    INTO original_request, attempted_request, original_fingerprinted, attempted_fingerprinted, original_missing,
        attempted_missing, visible
    FROM opsdesk.conflicts c JOIN opsdesk.operations o ON o.tenant = c.tenant AND o.tool = c.tool AND o.key = c.key
    WHERE c.tenant = a.tenant AND c.id = conflict_id AND o.id = a.operation_id;
    PERFORM opsdesk.reveal_mark(a, visible);
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.reveal_claim(text, bigint, text[]) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_name(text, bigint) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_mark(opsdesk.audit, boolean) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_conflict_request(bigint, text, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_conflict_fetch(text, bigint) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.reveal_claim(text, bigint, text[]), opsdesk.reveal_name(text, bigint),
    opsdesk.reveal_mark(opsdesk.audit, boolean), opsdesk.reveal_conflict_request(bigint, text, text),
    opsdesk.reveal_conflict_fetch(text, bigint)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.reveal_claim(text, bigint, text[]), opsdesk.reveal_name(text, bigint),
    opsdesk.reveal_mark(opsdesk.audit, boolean)
    TO opsdesk_owner;
-- Viewers may call them: the request refuses them and audits the
-- attempt, the fetch refuses them.
GRANT EXECUTE ON FUNCTION opsdesk.reveal_conflict_request(bigint, text, text), opsdesk.reveal_conflict_fetch(text, bigint)
    TO opsdesk_viewer;
