-- Stored values come back exactly as they were written (issue 11).
--
-- Results and intents were jsonb, which keeps a parsed form: a result the
-- library stored as {"reason":"over quota","limit":3} was replayed as
-- {"limit": 3, "reason": "over quota"}, so a service that answers a retry
-- with the stored bytes (the HTTP middleware does) answered differently the
-- second time, and the intent an auditor revealed did not hash to the
-- record's fingerprint. Both columns are json now: the text as written,
-- checked to be JSON. Nothing reads them with jsonb operators; the people's
-- functions still take jsonb and the assignment cast stores it.
--
-- json has no equality operator, so the state machine's function compares
-- these columns (and whole rows) as text. The intent becomes immutable to
-- the people's functions too (it always was to the service, which has no
-- UPDATE on it).
--
-- A transaction's record may be inserted completed (the fast path). DoTx
-- ran reserve-then-complete inside one transaction, so nobody could ever
-- see its pending record: inserting it completed, in the same transaction
-- as the business writes, gives the same guarantees (the primary key still
-- serializes concurrent attempts; the loser's transaction rolls back and it
-- replays) and writes each index once instead of twice. The service may
-- therefore insert a completed record of effect local, attempt 1, version 1,
-- completed now. That allows no more than reserving and completing did:
-- the same login could always insert a pending record and complete it.
-- The insert trigger's WHEN condition recognises both inserts, and now
-- checks that a pending one has no result, since the service may insert
-- those columns. reveal_request and reveal_fetch hand out the stored text
-- (reveal_fetch returns json; a return type cannot be replaced, so it is
-- dropped and created again with its grants).

-- +goose Up
ALTER TABLE opsdesk.operations
    ALTER COLUMN intent TYPE json USING intent::json,
    ALTER COLUMN result TYPE json USING result::json;

GRANT INSERT (outcome, result, result_ref, completed_at, expires_at) ON opsdesk.operations TO opsdesk_service;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.operations_state_machine() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- OLD with the columns the step may change taken from NEW: the row the
    -- step must produce, compared with NEW as a whole.
    e    opsdesk.operations;
    rule text;
BEGIN
    IF current_setting('is_superuser') = 'on' THEN
        -- A superuser's record is no service login's lease.
        IF TG_OP = 'INSERT' AND NEW.owner_role = session_user THEN
            NEW.owner_role := NULL;
        END IF;
        RETURN NEW;
    END IF;

    IF current_user = 'opsdesk_owner' THEN
        -- A people's function, which checks and audits its own changes.
        IF TG_OP = 'INSERT' THEN
            rule := 'the people''s functions do not create records';
        ELSIF (NEW.id, NEW.tenant, NEW.tool, NEW.key, NEW.fingerprint, NEW.created_at, NEW.intent::text)
              IS DISTINCT FROM (OLD.id, OLD.tenant, OLD.tool, OLD.key, OLD.fingerprint, OLD.created_at, OLD.intent::text) THEN
            rule := 'id, identity, fingerprint, intent and created_at never change';
        ELSIF NEW.version < OLD.version
           OR (NEW.version = OLD.version AND (NEW.state, NEW.owner, NEW.attempt, NEW.outcome, NEW.result::text, NEW.result_ref)
               IS DISTINCT FROM (OLD.state, OLD.owner, OLD.attempt, OLD.outcome, OLD.result::text, OLD.result_ref)) THEN
            rule := 'the version goes up with every change of state, owner, attempt or result, and never down';
        ELSE
            RETURN NEW;
        END IF;

    ELSIF TG_OP = 'INSERT' THEN
        IF NEW.attempt <> 1 OR NEW.version <> 1 OR NEW.conflict_count <> 0 OR NEW.held
           OR NEW.last_conflict_at IS NOT NULL OR NEW.created_at <> now() OR NEW.updated_at <> now()
           OR NEW.leased_at IS DISTINCT FROM now() OR NEW.lease_expires_at < now() THEN
            rule := 'a new record is attempt 1, version 1, leased from now, with no conflicts';
        ELSIF NEW.state = 'pending' AND (NEW.outcome IS NOT NULL OR NEW.result IS NOT NULL
              OR NEW.result_ref IS NOT NULL OR NEW.completed_at IS NOT NULL OR NEW.expires_at IS NOT NULL) THEN
            rule := 'a new record that is pending has no outcome';
        ELSIF NEW.state = 'completed' AND (NEW.effect <> 'local' OR NEW.completed_at IS DISTINCT FROM now()
              OR NEW.expires_at < now()) THEN
            rule := 'a new record is completed only by a local transaction (effect local), completed now, '
                || 'to expire no earlier than now';
        ELSIF NEW.state NOT IN ('pending', 'completed') THEN
            rule := 'a new record is pending, or completed by a local transaction';
        ELSE
            NEW.owner_role := session_user;
            RETURN NEW;
        END IF;

    ELSE
        e := OLD;
        IF NEW.attempt <> OLD.attempt THEN
            IF OLD.held THEN
                rule := 'a record under legal hold is not taken over';
            ELSIF NOT (OLD.state = 'released' OR (OLD.state = 'pending' AND OLD.lease_expires_at <= now()
                       AND OLD.effect = 'external_idempotent' AND NEW.effect = 'external_idempotent')) THEN
                rule := 'only a released record, or a pending one whose lease expired and whose provider '
                    || 'deduplicates by key, is taken over; a ' || OLD.state || ' ' || OLD.effect || ' record is not';
            ELSIF NEW.state <> 'pending' OR NEW.attempt <> OLD.attempt + 1 OR NEW.version <> OLD.version + 1
               OR NEW.updated_at <> now() OR NEW.leased_at IS DISTINCT FROM now() OR NEW.lease_expires_at < now() THEN
                rule := 'a takeover is the next attempt of a pending record (attempt and version + 1), leased from now';
            END IF;
            e.state := NEW.state;
            e.owner := NEW.owner;
            e.attempt := NEW.attempt;
            e.effect := NEW.effect;
            e.leased_at := NEW.leased_at;
            e.lease_expires_at := NEW.lease_expires_at;
            e.updated_at := NEW.updated_at;
            e.version := NEW.version;
            NEW.owner_role := session_user;
            e.owner_role := session_user;
        ELSIF NEW.state <> OLD.state THEN
            IF OLD.state = 'completed' THEN
                rule := 'a completed record is final: only the people''s functions change it';
            ELSIF OLD.state <> 'pending' THEN
                rule := 'a ' || OLD.state || ' record changes only by a takeover';
            ELSIF OLD.owner_role <> session_user THEN
                rule := 'the lease is held by login ' || OLD.owner_role || ', not ' || session_user;
            ELSIF NEW.version <> OLD.version + 1 OR NEW.updated_at <> now() THEN
                rule := 'completing or releasing a record raises its version by one, updated now';
            ELSIF NEW.state = 'completed' AND (NEW.completed_at IS DISTINCT FROM now() OR NEW.expires_at < now()) THEN
                rule := 'a record is completed now (completed_at = now()), to expire no earlier than now';
            END IF;
            e.state := NEW.state;
            e.version := NEW.version;
            e.updated_at := NEW.updated_at;
            IF NEW.state = 'completed' THEN
                e.outcome := NEW.outcome;
                e.result := NEW.result;
                e.result_ref := NEW.result_ref;
                e.completed_at := NEW.completed_at;
                e.expires_at := NEW.expires_at;
            END IF;
        ELSIF NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at THEN
            IF OLD.state <> 'pending' THEN
                rule := 'only a pending record has a lease to renew';
            ELSIF OLD.owner_role <> session_user THEN
                rule := 'the lease is held by login ' || OLD.owner_role || ', not ' || session_user;
            ELSIF NEW.lease_expires_at < now()
               OR (NEW.lease_expires_at > OLD.lease_expires_at AND OLD.lease_expires_at <= now()) THEN
                rule := 'a lease is renewed while it is live, and never ends in the past';
            END IF;
            e.lease_expires_at := NEW.lease_expires_at;
        END IF;
        IF NEW.conflict_count <> OLD.conflict_count OR NEW.last_conflict_at IS DISTINCT FROM OLD.last_conflict_at THEN
            IF NEW.conflict_count <> OLD.conflict_count + 1 OR NEW.last_conflict_at IS DISTINCT FROM now() THEN
                rule := coalesce(rule, 'a conflict is counted one at a time, now');
            END IF;
            e.conflict_count := NEW.conflict_count;
            e.last_conflict_at := NEW.last_conflict_at;
        END IF;
        -- json has no equality operator: the rows are compared as text,
        -- which is equal exactly when every column is (both sides are
        -- printed by this session, with the same settings).
        IF rule IS NULL AND e::text IS DISTINCT FROM NEW::text THEN
            rule := CASE WHEN OLD.state = 'completed' THEN 'a completed record is final: only the people''s functions change it'
                         WHEN OLD.held THEN 'a record under legal hold is frozen'
                         ELSE 'the write changes what its step may not (identity, fingerprint, version, timestamps, '
                             || 'result or ownership outside completion and takeover)' END;
        END IF;
        IF rule IS NULL THEN
            RETURN NEW;
        END IF;
    END IF;

    RAISE EXCEPTION 'opsdesk.operations record % (%): %', NEW.id, CASE TG_OP WHEN 'INSERT' THEN 'new' ELSE OLD.state END, rule
        USING ERRCODE = 'check_violation', SCHEMA = 'opsdesk', TABLE = 'operations',
            CONSTRAINT = 'operations_state_machine',
            HINT = 'The library''s steps are allowed; a person changes a record through the console (opsdesk ops).';
END
$$;
-- +goose StatementEnd

-- The reservation (reserveSQL) and DoTx's completed insert
-- (insertCompletedSQL), by a service login. outcome is NULL on a pending
-- record by the table's operations_outcome constraint; owner_role defaults
-- to the login and the columns the service cannot insert keep their
-- defaults.
DROP TRIGGER operations_state_machine_insert ON opsdesk.operations;
CREATE TRIGGER operations_state_machine_insert BEFORE INSERT ON opsdesk.operations
    FOR EACH ROW WHEN (NOT coalesce(NEW.attempt = 1 AND NEW.leased_at = now() AND NEW.lease_expires_at >= now()
        AND current_setting('is_superuser') = 'off'
        AND CASE NEW.state
            WHEN 'pending' THEN NEW.result IS NULL AND NEW.result_ref IS NULL AND NEW.completed_at IS NULL
                AND NEW.expires_at IS NULL
            WHEN 'completed' THEN NEW.effect = 'local' AND NEW.completed_at = now()
                AND (NEW.expires_at IS NULL OR NEW.expires_at >= now())
            END, false))
    EXECUTE FUNCTION opsdesk.operations_state_machine();
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_insert;

-- reveal_request as in migration 00016, with the value read as json.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.reveal_request(p_id bigint, p_field text, p_reason text, p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o opsdesk.operations;
    a opsdesk.audit;
    v json;
BEGIN
    a.action := 'reveal:' || left(coalesce(p_field, ''), 20);
    a.reason := opsdesk.clean_input(p_reason);
    a.display_name := opsdesk.clean_input(p_display_name);
    a.operation_id := p_id;
    IF p_id IS NULL OR p_id < 1 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'an operation id is a whole number from 1 up, not ' || coalesce(p_id::text, 'NULL'));
    END IF;
    o := opsdesk.subject(p_id, false);
    IF o.id IS NULL THEN
        RETURN opsdesk.refuse(a, 'not_found', NULL);
    END IF;
    a := opsdesk.about(a, o);
    v := CASE p_field WHEN 'intent' THEN o.intent WHEN 'result' THEN o.result END;
    IF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        RETURN opsdesk.refuse(a, 'not_permitted', quote_ident(session_user) || ' may not reveal stored values: it is not granted opsdesk_operator');
    ELSIF p_field IS NULL OR p_field NOT IN ('intent', 'result') THEN
        RETURN opsdesk.refuse(a, 'invalid', 'reveal the intent or the result, not ' || opsdesk.quoted(p_field, 20));
    ELSIF a.reason IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a reason is required');
    ELSIF octet_length(a.reason) > 2000 OR octet_length(a.display_name) > 200 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'the reason is limited to 2000 bytes, the display name to 200');
    ELSIF v IS NULL THEN
        RETURN opsdesk.refuse(a, 'no_value', 'the record has no stored ' || p_field);
    END IF;
    a.outcome := 'succeeded';
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, a.state_after, o.version)::opsdesk.decision_result;
END
$$;
-- +goose StatementEnd

-- reveal_fetch as in migration 00016, returning the stored text (json).
DROP FUNCTION opsdesk.reveal_fetch(text, bigint);
-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_fetch(p_tenant text, p_seq bigint) RETURNS json
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a     opsdesk.audit;
    v       json;
    visible boolean;
    name    text;
BEGIN
    -- Before this function writes: a transaction that wrote nothing yet
    -- cannot be the request's own, whose audit record it would hold.
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'reveal_fetch runs in a transaction of its own, after reveal_request''s committed'
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    IF p_tenant IS NULL OR p_seq IS NULL OR p_seq < 1 THEN
        RAISE EXCEPTION 'a reveal is named by its audit record: a chain and a sequence number from 1 up'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    name := CASE WHEN p_tenant = '' THEN '' ELSE opsdesk.quoted(p_tenant, 40) END || '#' || p_seq;
    IF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        RAISE EXCEPTION '% may not reveal stored values: it is not granted opsdesk_operator', quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Row-level security: the request's chain must still be visible.
    SELECT * INTO a FROM opsdesk.audit
    WHERE tenant = p_tenant AND seq = p_seq AND role = session_user AND outcome = 'succeeded'
      AND action IN ('reveal:intent', 'reveal:result') AND at > clock_timestamp() - interval '1 minute';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no reveal % by % in the last minute', name, quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT true, CASE a.action WHEN 'reveal:intent' THEN o.intent ELSE o.result END INTO visible, v
    FROM opsdesk.operations o WHERE o.tenant = a.tenant AND o.id = a.operation_id;
    IF visible IS NULL THEN
        RAISE EXCEPTION 'the record of reveal % is no longer visible to %', name, quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO opsdesk.reveal_fetches (tenant, seq, role, fetched_at)
    VALUES (p_tenant, p_seq, session_user, clock_timestamp()) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reveal % was fetched already: a reveal shows its value once; reveal it again (it is audited again)', name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN v;
END
$$;
-- +goose StatementEnd
ALTER FUNCTION opsdesk.reveal_fetch(text, bigint) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.reveal_fetch(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.reveal_fetch(text, bigint) TO opsdesk_viewer;
