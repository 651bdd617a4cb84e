-- People's access, enforced by PostgreSQL; human decisions; the audit trail.
--
-- People log in with their own roles, granted one of three group roles:
--   opsdesk_viewer    reads states, never stored intents or results;
--   opsdesk_operator  viewer, plus decisions and reveals;
--   opsdesk_admin     operator, plus access grants (and, later, retention).
-- They change records only through the SECURITY DEFINER functions below,
-- owned by the non-login role opsdesk_owner: each checks the membership of
-- session_user (the authenticated role), the record's state and the version
-- the operator saw, applies the change and appends the audit record in the
-- same transaction. A refused or failed attempt changes nothing and is
-- audited; the function returns it instead of raising, so its transaction
-- commits the audit record alone.
--
-- Row-level security (FORCE) scopes people to the tenants opsdesk.access
-- maps their login role to. The policies ask about session_user, so they
-- hold inside the SECURITY DEFINER functions too.
--
-- The audit trail is one hash chain per tenant ('' is the chain of events
-- outside any tenant: access grants, attempts on records the role cannot
-- see). The sequence is assigned under the chain head's row lock, so chain
-- order is commit order. Rows are append-only by privilege and by ENABLE
-- ALWAYS triggers. internal/audit recomputes the chain independently.

-- +goose Up

-- The audit hash needs an exact epoch (extract returns numeric from 14 on).
-- +goose StatementBegin
DO $$
BEGIN
    IF current_setting('server_version_num')::int < 140000 THEN
        RAISE EXCEPTION 'opsdesk needs PostgreSQL 14 or later; this server is %', current_setting('server_version');
    END IF;
END
$$;
-- +goose StatementEnd

-- The canonical request ({intent, tool, version}) of each record, which
-- the library stores at reservation: what an operator reconciling an
-- unknown outcome must check at the provider. Only an audited reveal
-- shows it to people.
ALTER TABLE opsdesk.operations ADD COLUMN intent jsonb;
GRANT INSERT (intent) ON opsdesk.operations TO opsdesk_service;

-- Roles are cluster-wide: created when missing; an administrator may create
-- them beforehand for a database owner without CREATEROLE (README).
-- +goose StatementBegin
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['opsdesk_viewer', 'opsdesk_operator', 'opsdesk_admin', 'opsdesk_owner'] LOOP
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            END IF;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- another database's migration created it
        END;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- Memberships, granted once per cluster (again would need ADMIN OPTION).
-- opsdesk_owner holds the group roles WITH ADMIN OPTION so that its
-- grant_access function can grant them; the migrating role must be able to
-- become opsdesk_owner to hand it the functions.
-- +goose StatementBegin
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT * FROM (VALUES
        ('opsdesk_viewer', 'opsdesk_operator', false),
        ('opsdesk_operator', 'opsdesk_admin', false),
        ('opsdesk_viewer', 'opsdesk_owner', true),
        ('opsdesk_operator', 'opsdesk_owner', true),
        ('opsdesk_admin', 'opsdesk_owner', true),
        ('opsdesk_owner', current_user, false)) AS v(grp, member, admin)
    LOOP
        IF NOT EXISTS (
            SELECT FROM pg_auth_members m
            WHERE m.roleid = g.grp::regrole AND m.member = g.member::regrole AND (m.admin_option OR NOT g.admin))
        AND NOT (g.member = current_user AND (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) THEN
            EXECUTE format('GRANT %I TO %I', g.grp, g.member) || CASE WHEN g.admin THEN ' WITH ADMIN OPTION' ELSE '' END;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

GRANT USAGE ON SCHEMA opsdesk TO opsdesk_viewer, opsdesk_owner;
-- ALTER FUNCTION … OWNER TO needs it; opsdesk_owner cannot log in.
GRANT CREATE ON SCHEMA opsdesk TO opsdesk_owner;

-- Which tenants a login role sees: '*' is every tenant.
CREATE TABLE opsdesk.access (
    role       text        NOT NULL,
    tenant     text        NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    granted_by text        NOT NULL,
    CONSTRAINT access_pkey PRIMARY KEY (role, tenant),
    CONSTRAINT access_tenant CHECK (tenant <> '')
);

-- Whether session_user sees every tenant (a superuser does), and the
-- tenants it sees. The policies call them in scalar subqueries: once per
-- query, not per row.
CREATE FUNCTION opsdesk.sees_every_tenant() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
SELECT EXISTS (SELECT FROM opsdesk.access WHERE role = session_user AND tenant = '*')
    OR EXISTS (SELECT FROM pg_roles WHERE rolname = session_user AND rolsuper)
$$;

CREATE FUNCTION opsdesk.visible_tenants() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(array_agg(tenant), '{}') FROM opsdesk.access WHERE role = session_user $$;

-- The audit trail.
CREATE TABLE opsdesk.audit (
    tenant           text        NOT NULL,
    seq              bigint      NOT NULL,
    event_id         uuid        NOT NULL,
    at               timestamptz NOT NULL,
    -- The authenticated role, and a display name the client claimed
    -- (configuration), kept apart: only the first is proven.
    role             text        NOT NULL,
    display_name     text,
    action           text        NOT NULL,
    outcome          text        NOT NULL,
    tool             text,
    key              text,
    operation_id     bigint,
    state_before     text,
    state_after      text,
    version_before   bigint,
    version_after    bigint,
    reason           text,
    evidence_digest  text,
    evidence_summary text,
    forced           boolean     NOT NULL,
    override         boolean     NOT NULL,
    -- What else the action decided or why it was refused: result
    -- reference, snooze time, the revealed field, the refusal.
    details          jsonb,
    prev_hash        bytea,
    hash             bytea       NOT NULL,
    hash_version     smallint    NOT NULL,
    CONSTRAINT audit_pkey PRIMARY KEY (tenant, seq),
    CONSTRAINT audit_outcome CHECK (outcome IN ('succeeded', 'denied', 'failed')),
    CONSTRAINT audit_reason_length CHECK (octet_length(reason) <= 2000),
    CONSTRAINT audit_evidence_length CHECK (octet_length(evidence_summary) <= 2000)
);
CREATE INDEX audit_operation_idx ON opsdesk.audit (tenant, operation_id, seq) WHERE operation_id IS NOT NULL;

CREATE TABLE opsdesk.audit_heads (
    tenant text   NOT NULL,
    seq    bigint NOT NULL,
    hash   bytea,
    CONSTRAINT audit_heads_pkey PRIMARY KEY (tenant)
);

-- +goose StatementBegin
CREATE FUNCTION opsdesk.audit_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'opsdesk.audit is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON opsdesk.audit
    FOR EACH ROW EXECUTE FUNCTION opsdesk.audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON opsdesk.audit
    FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.audit_append_only();
-- ALWAYS: they fire with session_replication_role = replica too.
ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_change;
ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_truncate;

-- The hash of an audit row, hash version 1: SHA-256 over 'opsdesk-audit-v1'
-- followed by each field below, in this order, as its length in bytes, ':'
-- and its text ('-' for NULL). Times are microseconds since the Unix epoch,
-- booleans 't' or 'f', details its jsonb text, prev_hash lowercase hex.
-- Lengths count UTF-8 bytes whatever the database's encoding. The epoch
-- is exact from PostgreSQL 14 on (extract returns numeric). internal/audit
-- computes the same in Go.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.audit_hash(a opsdesk.audit) RETURNS bytea
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
SELECT sha256(convert_to('opsdesk-audit-v1' || string_agg(
    CASE WHEN f IS NULL THEN '-' ELSE octet_length(convert_to(f, 'UTF8'))::text || ':' || f END, '' ORDER BY n), 'UTF8'))
FROM unnest(ARRAY[
    a.tenant, a.seq::text, a.event_id::text,
    (extract(epoch FROM a.at) * 1000000)::bigint::text,
    a.role, a.display_name, a.action, a.outcome, a.tool, a.key, a.operation_id::text,
    a.state_before, a.state_after, a.version_before::text, a.version_after::text,
    a.reason, a.evidence_digest, a.evidence_summary,
    CASE WHEN a.forced THEN 't' ELSE 'f' END, CASE WHEN a.override THEN 't' ELSE 'f' END,
    a.details::text, encode(a.prev_hash, 'hex')
]) WITH ORDINALITY AS u(f, n)
$$;
-- +goose StatementEnd

-- Appends a to its tenant's chain: sequence, previous hash, time, role and
-- hash are assigned here, under the chain head's row lock (held until
-- commit, so chain order is commit order).
-- +goose StatementBegin
CREATE FUNCTION opsdesk.audit_append(a opsdesk.audit) RETURNS opsdesk.audit
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    head opsdesk.audit_heads;
BEGIN
    INSERT INTO opsdesk.audit_heads (tenant, seq) VALUES (a.tenant, 0) ON CONFLICT DO NOTHING;
    SELECT * INTO head FROM opsdesk.audit_heads WHERE tenant = a.tenant FOR UPDATE;
    a.seq := head.seq + 1;
    a.prev_hash := head.hash;
    a.event_id := gen_random_uuid();
    -- The clock under the head's lock: times rise with the sequence,
    -- however long the caller's transaction was open.
    a.at := clock_timestamp();
    a.role := session_user;
    a.forced := coalesce(a.forced, false);
    a.override := coalesce(a.override, false);
    a.hash_version := 1;
    a.hash := opsdesk.audit_hash(a);
    INSERT INTO opsdesk.audit SELECT a.*;
    UPDATE opsdesk.audit_heads SET seq = a.seq, hash = a.hash WHERE tenant = a.tenant;
    RETURN a;
END
$$;
-- +goose StatementEnd

-- The state an operator sees: stuck is pending with an expired lease.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.view_state(o opsdesk.operations) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN o.state = 'pending' AND o.lease_expires_at <= now() THEN 'stuck'
            WHEN o.state = 'completed' AND o.outcome = 'rejected' THEN 'rejected'
            ELSE o.state END
$$;
-- +goose StatementEnd

-- A decision's answer.
CREATE TYPE opsdesk.decision_result AS (
    outcome text,   -- succeeded, denied or failed
    code    text,   -- why, for programs: not_found, not_permitted, invalid,
                    -- changed, not_pending, lease_live, contradicts_lookup,
                    -- no_conflicts, no_value
    message text,   -- why, for people
    tenant  text,   -- the chain the audit record went to
    seq     bigint, -- its sequence
    state   text,   -- the record's state and version after the attempt
    version bigint
);

-- about fills an audit record's subject from record o, as it is before the
-- attempt (and after it, unless the attempt changes it).
-- +goose StatementBegin
CREATE FUNCTION opsdesk.about(a opsdesk.audit, o opsdesk.operations) RETURNS opsdesk.audit
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    a.tenant := o.tenant;
    a.tool := o.tool;
    a.key := o.key;
    a.operation_id := o.id;
    a.state_before := opsdesk.view_state(o);
    a.state_after := a.state_before;
    a.version_before := o.version;
    a.version_after := o.version;
    RETURN a;
END
$$;
-- +goose StatementEnd

-- subject reads record p_id as session_user may see it: row-level
-- security makes absent and hidden look the same (all fields NULL), and
-- such refusals go to the '' chain. With p_lock it locks the record for
-- the decision, but only for a role that may decide: a viewer's call must
-- not hold up the service.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.subject(p_id bigint, p_lock boolean) RETURNS opsdesk.operations
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o opsdesk.operations;
BEGIN
    IF p_lock AND pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        SELECT * INTO o FROM opsdesk.operations WHERE id = p_id FOR UPDATE;
    ELSE
        SELECT * INTO o FROM opsdesk.operations WHERE id = p_id;
    END IF;
    RETURN o;
END
$$;
-- +goose StatementEnd

-- refuse appends a refused attempt (a.tenant NULL: the '' chain) and
-- returns it: denied when the role or the record's state forbids it,
-- failed when the request itself is wrong. It words not_found itself.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.refuse(a opsdesk.audit, p_code text, p_message text) RETURNS opsdesk.decision_result
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    a.tenant := coalesce(a.tenant, '');
    -- A refusal of over-long text is audited with the text cut short:
    -- 475 characters are at most 1,900 bytes.
    IF octet_length(a.reason) > 2000 THEN
        a.reason := left(a.reason, 475) || '… (cut)';
    END IF;
    IF octet_length(a.evidence_summary) > 2000 THEN
        a.evidence_summary := left(a.evidence_summary, 475) || '… (cut)';
    END IF;
    IF octet_length(a.display_name) > 200 THEN
        a.display_name := left(a.display_name, 40) || '… (cut)';
    END IF;
    IF octet_length(a.evidence_digest) > 200 THEN
        a.evidence_digest := left(a.evidence_digest, 40) || '… (cut)';
    END IF;
    IF octet_length(a.details::text) > 4000 THEN
        a.details := jsonb_build_object('cut', left(a.details::text, 900));
    END IF;
    a.outcome := CASE WHEN p_code IN ('not_permitted', 'not_pending', 'lease_live', 'contradicts_lookup')
                      THEN 'denied' ELSE 'failed' END;
    IF p_code = 'not_found' THEN
        p_message := 'no operation ' || a.operation_id || ' (or not visible to ' || session_user || ')';
    END IF;
    a.details := coalesce(a.details, '{}') || jsonb_build_object('refusal', p_code, 'message', p_message);
    a := opsdesk.audit_append(a);
    RETURN (a.outcome, p_code, p_message, a.tenant, a.seq, a.state_after, a.version_after)::opsdesk.decision_result;
END
$$;
-- +goose StatementEnd

-- Call the functions below in FROM (SELECT * FROM opsdesk.decide(…)):
-- SELECT (opsdesk.decide(…)).* would run the function once per column.
--
-- decide applies a human decision to record p_id. p_decision is completed,
-- not-executed, failed or defer. p_lookup is a lookup's definite answer
-- (found, not_found) or NULL; a decision it contradicts needs p_override.
-- A record with a live lease needs p_force. p_retention is the tool's
-- retention (completed and failed records expire after it).
-- +goose StatementBegin
CREATE FUNCTION opsdesk.decide(
    p_id bigint, p_decision text, p_expect_version bigint, p_reason text,
    p_result_ref text DEFAULT NULL, p_result jsonb DEFAULT NULL,
    p_evidence_digest text DEFAULT NULL, p_evidence_summary text DEFAULT NULL, p_lookup text DEFAULT NULL,
    p_force boolean DEFAULT false, p_override boolean DEFAULT false,
    p_retention interval DEFAULT interval '7 days', p_snooze_until timestamptz DEFAULT NULL,
    p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o    opsdesk.operations;
    a    opsdesk.audit;
    code text;
    msg  text;
    live boolean;
BEGIN
    a.action := 'decide:' || coalesce(p_decision, '');
    a.reason := nullif(btrim(p_reason), '');
    a.display_name := p_display_name;
    a.evidence_digest := p_evidence_digest;
    a.evidence_summary := p_evidence_summary;
    a.forced := coalesce(p_force, false);
    a.override := coalesce(p_override, false);
    a.operation_id := p_id;
    a.details := jsonb_strip_nulls(jsonb_build_object('expect_version', p_expect_version,
        'lookup', left(p_lookup, 40), 'result_ref', left(p_result_ref, 500), 'snooze_until', p_snooze_until,
        'retention', p_retention::text,
        -- What retries will be answered with, as stored.
        'result_sha256', encode(sha256(convert_to(p_result::text, 'UTF8')), 'hex')));

    o := opsdesk.subject(p_id, true);
    IF o.id IS NULL THEN
        RETURN opsdesk.refuse(a, 'not_found', NULL);
    END IF;
    a := opsdesk.about(a, o);
    live := o.state = 'pending' AND o.lease_expires_at > now();

    IF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        code := 'not_permitted';
        msg := session_user || ' may not decide: it is not granted opsdesk_operator';
    ELSIF octet_length(p_display_name) > 200 OR octet_length(p_evidence_digest) > 200
       OR octet_length(p_result_ref) > 500 OR octet_length(p_result::text) > 65536 THEN
        code := 'invalid';
        msg := 'too long: the display name and evidence digest are limited to 200 bytes, the result reference to 500, the result to 64 KiB';
    ELSIF p_decision IS NULL OR p_decision NOT IN ('completed', 'not-executed', 'failed', 'defer') THEN
        code := 'invalid';
        msg := 'unknown decision ' || coalesce(quote_literal(p_decision), 'NULL') || ' (completed, not-executed, failed, defer)';
    ELSIF a.reason IS NULL THEN
        code := 'invalid';
        msg := 'a reason is required';
    ELSIF octet_length(a.reason) > 2000 OR octet_length(a.evidence_summary) > 2000 THEN
        code := 'invalid';
        msg := 'the reason and the evidence summary are limited to 2000 bytes each';
    ELSIF p_lookup IS NOT NULL AND p_lookup NOT IN ('found', 'not_found') THEN
        code := 'invalid';
        msg := 'unknown lookup answer ' || quote_literal(p_lookup) || ' (found, not_found)';
    ELSIF p_decision = 'completed' AND nullif(btrim(p_result_ref), '') IS NULL THEN
        code := 'invalid';
        msg := 'confirming completed needs the provider''s result reference';
    ELSIF p_decision = 'defer' AND (p_snooze_until IS NULL OR p_snooze_until <= now()) THEN
        code := 'invalid';
        msg := 'defer needs a snooze time in the future';
    ELSIF p_retention IS NULL OR p_retention <= interval '0' THEN
        code := 'invalid';
        msg := 'retention must be positive';
    ELSIF p_expect_version IS DISTINCT FROM o.version THEN
        code := 'changed';
        msg := 'changed since you looked: now version ' || o.version || ' (' || a.state_before || '), you saw ' ||
            coalesce('version ' || p_expect_version, 'no version');
    ELSIF o.state <> 'pending' THEN
        code := 'not_pending';
        msg := 'the record is ' || a.state_before || ', not pending: there is nothing to decide';
    ELSIF live AND p_decision <> 'defer' AND NOT a.forced THEN
        code := 'lease_live';
        msg := 'the lease is live (it expires in ' || date_trunc('second', o.lease_expires_at - now()) ||
            ', held by ' || o.owner || '): deciding needs force';
    ELSIF NOT a.override AND ((p_lookup = 'found' AND p_decision IN ('not-executed', 'failed'))
                           OR (p_lookup = 'not_found' AND p_decision = 'completed')) THEN
        code := 'contradicts_lookup';
        msg := 'the lookup says ' || replace(p_lookup, '_', ' ') || ', which contradicts ' || p_decision ||
            ': deciding needs override';
    END IF;
    IF code IS NOT NULL THEN
        RETURN opsdesk.refuse(a, code, msg);
    END IF;

    IF p_decision = 'completed' THEN
        UPDATE opsdesk.operations
        SET state = 'completed', outcome = 'succeeded', result = coalesce(p_result, 'null'::jsonb),
            result_ref = p_result_ref, completed_at = now(), expires_at = now() + p_retention,
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

-- ack_conflicts marks record p_id's unreviewed conflicting attempts that
-- the person saw (p_seen: conflicts that arrived since stay unreviewed) as
-- reviewed by session_user.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.ack_conflicts(p_id bigint, p_seen bigint[], p_reason text, p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o   opsdesk.operations;
    a   opsdesk.audit;
    ids bigint[];
BEGIN
    a.action := 'conflicts:ack';
    a.reason := nullif(btrim(p_reason), '');
    a.display_name := p_display_name;
    a.operation_id := p_id;
    o := opsdesk.subject(p_id, true);
    IF o.id IS NULL THEN
        RETURN opsdesk.refuse(a, 'not_found', NULL);
    END IF;
    a := opsdesk.about(a, o);
    IF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        RETURN opsdesk.refuse(a, 'not_permitted', session_user || ' may not acknowledge conflicts: it is not granted opsdesk_operator');
    ELSIF octet_length(p_display_name) > 200 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'the display name is limited to 200 bytes');
    ELSIF a.reason IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a reason is required');
    ELSIF octet_length(a.reason) > 2000 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'the reason is limited to 2000 bytes');
    END IF;
    WITH reviewed AS (
        UPDATE opsdesk.conflicts SET reviewed_at = now(), reviewed_by = session_user
        WHERE tenant = o.tenant AND tool = o.tool AND key = o.key AND reviewed_at IS NULL AND id = ANY (p_seen)
        RETURNING id)
    SELECT array_agg(id ORDER BY id) INTO ids FROM reviewed;
    IF ids IS NULL THEN
        RETURN opsdesk.refuse(a, 'no_conflicts', 'the record has no unreviewed conflicts among those you saw');
    END IF;
    a.outcome := 'succeeded';
    a.details := jsonb_build_object('conflicts', to_jsonb(ids));
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, a.state_after, o.version)::opsdesk.decision_result;
END
$$;
-- +goose StatementEnd

-- Revealing a stored intent or result takes two transactions, so that the
-- audit record commits before anyone sees the value, whatever the client
-- does: reveal_request audits the reveal (or its refusal) and names its
-- audit record; reveal_fetch, in a later transaction that has written
-- nothing (as the request's own would have), returns the value for a
-- committed request of the same role from the last five minutes.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_request(p_id bigint, p_field text, p_reason text, p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o opsdesk.operations;
    a opsdesk.audit;
    v jsonb;
BEGIN
    a.action := 'reveal:' || left(coalesce(p_field, ''), 20);
    a.reason := nullif(btrim(p_reason), '');
    a.display_name := p_display_name;
    a.operation_id := p_id;
    o := opsdesk.subject(p_id, false);
    IF o.id IS NULL THEN
        RETURN opsdesk.refuse(a, 'not_found', NULL);
    END IF;
    a := opsdesk.about(a, o);
    v := CASE p_field WHEN 'intent' THEN o.intent WHEN 'result' THEN o.result END;
    IF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        RETURN opsdesk.refuse(a, 'not_permitted', session_user || ' may not reveal stored values: it is not granted opsdesk_operator');
    ELSIF p_field IS NULL OR p_field NOT IN ('intent', 'result') THEN
        RETURN opsdesk.refuse(a, 'invalid', 'reveal the intent or the result, not ' || coalesce(quote_literal(left(p_field, 20)), 'NULL'));
    ELSIF a.reason IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a reason is required');
    ELSIF octet_length(a.reason) > 2000 OR octet_length(p_display_name) > 200 THEN
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

-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_fetch(p_tenant text, p_seq bigint) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a opsdesk.audit;
BEGIN
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'reveal_fetch runs in a transaction of its own, after reveal_request''s committed'
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    SELECT * INTO a FROM opsdesk.audit
    WHERE tenant = p_tenant AND seq = p_seq AND role = session_user AND outcome = 'succeeded'
      AND action IN ('reveal:intent', 'reveal:result') AND at > clock_timestamp() - interval '5 minutes';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no reveal %#% of %s in the last five minutes', p_tenant, p_seq, session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN (SELECT CASE a.action WHEN 'reveal:intent' THEN o.intent ELSE o.result END
            FROM opsdesk.operations o WHERE o.tenant = a.tenant AND o.id = a.operation_id);
END
$$;
-- +goose StatementEnd

-- grant_access makes login role p_role a viewer, operator or admin of
-- tenant p_tenant ('*': every tenant), replacing its level; revoke_access
-- takes it all away. Only an admin who sees every tenant may.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.grant_access(p_role text, p_level text, p_tenant text, p_reason text,
    p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a   opsdesk.audit;
    lvl text;
BEGIN
    a.tenant := '';
    a.action := 'access:' || CASE WHEN p_level IS NULL THEN 'revoke' ELSE 'grant' END;
    a.reason := nullif(btrim(p_reason), '');
    a.display_name := p_display_name;
    a.details := jsonb_strip_nulls(jsonb_build_object('role', p_role, 'level', p_level, 'tenant', p_tenant));
    IF NOT pg_has_role(session_user, 'opsdesk_admin', 'MEMBER') OR NOT opsdesk.sees_every_tenant() THEN
        RETURN opsdesk.refuse(a, 'not_permitted', session_user || ' may not manage access: it needs opsdesk_admin and every tenant');
    ELSIF a.reason IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a reason is required');
    ELSIF octet_length(a.reason) > 2000 OR octet_length(p_display_name) > 200 THEN
        RETURN opsdesk.refuse(a, 'invalid', 'the reason is limited to 2000 bytes, the display name to 200');
    ELSIF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = p_role AND rolcanlogin) THEN
        RETURN opsdesk.refuse(a, 'invalid', 'no login role ' || coalesce(quote_ident(p_role), 'NULL') || ': create it first');
    ELSIF (SELECT rolsuper FROM pg_roles WHERE rolname = p_role)
       OR pg_has_role(p_role, 'opsdesk_service', 'MEMBER') OR pg_has_role(p_role, 'opsdesk_owner', 'MEMBER')
       OR EXISTS (SELECT FROM pg_auth_members WHERE roleid = p_role::regrole) THEN
        RETURN opsdesk.refuse(a, 'invalid', p_role || ' is not one person''s role: a superuser, a service (opsdesk_service), '
            || 'opsdesk_owner or a group with members cannot be given people''s access');
    ELSIF p_level IS NOT NULL AND p_level NOT IN ('viewer', 'operator', 'admin') THEN
        RETURN opsdesk.refuse(a, 'invalid', 'unknown level ' || quote_literal(p_level) || ' (viewer, operator, admin)');
    ELSIF p_level IS NOT NULL AND (p_tenant IS NULL OR btrim(p_tenant) = '') THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a tenant is required (''*'' for every tenant)');
    END IF;
    FOREACH lvl IN ARRAY ARRAY['viewer', 'operator', 'admin'] LOOP
        IF lvl IS DISTINCT FROM p_level AND pg_has_role(p_role, 'opsdesk_' || lvl, 'MEMBER') THEN
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
    RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, NULL, NULL)::opsdesk.decision_result;
END
$$;
-- +goose StatementEnd

-- A random key for the fingerprint tags, made here, readable by
-- opsdesk_owner alone.
CREATE TABLE opsdesk.secrets (
    name  text  NOT NULL,
    value bytea NOT NULL,
    CONSTRAINT secrets_pkey PRIMARY KEY (name)
);
INSERT INTO opsdesk.secrets (name, value)
VALUES ('fingerprint_tag', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));
GRANT SELECT ON opsdesk.secrets TO opsdesk_owner;

-- fingerprint_tags returns keyed tags of record p_id's fingerprint
-- (conflict_id NULL) and of its conflicting attempts': equal tags, equal
-- requests, and nothing to try requests against without the key.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.fingerprint_tags(p_id bigint) RETURNS TABLE (conflict_id bigint, tag text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
WITH k AS (SELECT value FROM opsdesk.secrets WHERE name = 'fingerprint_tag'),
     o AS (SELECT tenant, tool, key, fingerprint FROM opsdesk.operations WHERE id = p_id)
SELECT NULL::bigint, 'fp:' || encode(substr(sha256(k.value || o.fingerprint), 1, 6), 'hex') FROM k, o
UNION ALL
SELECT c.id, 'fp:' || encode(substr(sha256(k.value || c.fingerprint), 1, 6), 'hex')
FROM k, o JOIN opsdesk.conflicts c ON c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.fingerprint_tags(bigint) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.fingerprint_tags(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.fingerprint_tags(bigint) TO opsdesk_viewer;

ALTER FUNCTION opsdesk.sees_every_tenant() OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.visible_tenants() OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.audit_append(opsdesk.audit) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.refuse(opsdesk.audit, text, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.about(opsdesk.audit, opsdesk.operations) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.subject(bigint, boolean) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.ack_conflicts(bigint, bigint[], text, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_request(bigint, text, text, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_fetch(text, bigint) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.grant_access(text, text, text, text, text) OWNER TO opsdesk_owner;

REVOKE ALL ON FUNCTION opsdesk.sees_every_tenant(), opsdesk.visible_tenants(),
    opsdesk.audit_append(opsdesk.audit), opsdesk.refuse(opsdesk.audit, text, text),
    opsdesk.about(opsdesk.audit, opsdesk.operations), opsdesk.subject(bigint, boolean),
    opsdesk.audit_hash(opsdesk.audit), opsdesk.view_state(opsdesk.operations),
    opsdesk.audit_append_only(),
    opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text),
    opsdesk.ack_conflicts(bigint, bigint[], text, text), opsdesk.reveal_request(bigint, text, text, text),
    opsdesk.reveal_fetch(text, bigint),
    opsdesk.grant_access(text, text, text, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.sees_every_tenant(), opsdesk.visible_tenants() TO opsdesk_viewer, opsdesk_owner;
GRANT EXECUTE ON FUNCTION opsdesk.audit_hash(opsdesk.audit), opsdesk.view_state(opsdesk.operations) TO opsdesk_owner;
-- Viewers may call the decision functions: the functions refuse them and
-- audit the attempt.
GRANT EXECUTE ON FUNCTION
    opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text),
    opsdesk.ack_conflicts(bigint, bigint[], text, text), opsdesk.reveal_request(bigint, text, text, text),
    opsdesk.reveal_fetch(text, bigint),
    opsdesk.grant_access(text, text, text, text, text)
    TO opsdesk_viewer;

-- Table privileges. Viewers read states and the audit, never stored
-- results; nobody but the functions' owner writes.
GRANT SELECT (tenant, tool, key, id, tool_version, effect, state, outcome, owner, attempt,
              leased_at, lease_expires_at, created_at, updated_at, completed_at, expires_at, result_ref,
              version, conflict_count, last_conflict_at)
    ON opsdesk.operations TO opsdesk_viewer;
-- Fingerprints stay out of reach too: an unkeyed SHA-256 of a request
-- with few possible values gives the request away to whoever tries them
-- all. People compare attempts by keyed tags (fingerprint_tags).
GRANT SELECT (tenant, id, tool, key, operation_id, tool_version, owner, attempted_at, reviewed_at, reviewed_by)
    ON opsdesk.conflicts TO opsdesk_viewer;
-- Chain heads too: verification compares each chain's last record with
-- its head row, which catches a removed tail the chain alone cannot show.
GRANT SELECT ON opsdesk.audit, opsdesk.audit_heads TO opsdesk_viewer;
-- The console refuses a schema it does not know (goose's version table).
GRANT SELECT ON opsdesk.schema_migrations TO opsdesk_viewer;
GRANT SELECT, UPDATE ON opsdesk.operations TO opsdesk_owner;
GRANT SELECT, UPDATE (reviewed_at, reviewed_by) ON opsdesk.conflicts TO opsdesk_owner;
GRANT SELECT, INSERT ON opsdesk.audit TO opsdesk_owner;
GRANT SELECT, INSERT, UPDATE ON opsdesk.audit_heads TO opsdesk_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON opsdesk.access TO opsdesk_owner;

-- Row-level security. The service role (the library) sees every tenant;
-- people, and the functions acting for them, see their tenants.
ALTER TABLE opsdesk.operations ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE opsdesk.conflicts ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE opsdesk.audit ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE opsdesk.audit_heads ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;

CREATE POLICY service ON opsdesk.operations TO opsdesk_service USING (true) WITH CHECK (true);
CREATE POLICY service ON opsdesk.conflicts TO opsdesk_service USING (true) WITH CHECK (true);
CREATE POLICY people ON opsdesk.operations TO opsdesk_viewer, opsdesk_owner
    USING ((SELECT opsdesk.sees_every_tenant()) OR tenant = ANY ((SELECT opsdesk.visible_tenants())::text[]));
CREATE POLICY people ON opsdesk.conflicts TO opsdesk_viewer, opsdesk_owner
    USING ((SELECT opsdesk.sees_every_tenant()) OR tenant = ANY ((SELECT opsdesk.visible_tenants())::text[]));
-- The '' chain (events outside any tenant) is for those who see every tenant.
CREATE POLICY people ON opsdesk.audit TO opsdesk_viewer, opsdesk_owner
    USING ((SELECT opsdesk.sees_every_tenant()) OR tenant = ANY ((SELECT opsdesk.visible_tenants())::text[]));
CREATE POLICY people ON opsdesk.audit_heads TO opsdesk_viewer
    USING ((SELECT opsdesk.sees_every_tenant()) OR tenant = ANY ((SELECT opsdesk.visible_tenants())::text[]));
-- The functions append to any chain for any caller: the '' chain holds
-- refusals of records the caller cannot see.
CREATE POLICY append ON opsdesk.audit FOR INSERT TO opsdesk_owner WITH CHECK (true);
CREATE POLICY chains ON opsdesk.audit_heads TO opsdesk_owner USING (true) WITH CHECK (true);

-- The migrating role owns the tables; FORCE applies to it too.
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('CREATE POLICY migrator ON opsdesk.operations TO %I USING (true) WITH CHECK (true)', current_user);
    EXECUTE format('CREATE POLICY migrator ON opsdesk.conflicts TO %I USING (true) WITH CHECK (true)', current_user);
    EXECUTE format('CREATE POLICY migrator ON opsdesk.audit TO %I USING (true) WITH CHECK (true)', current_user);
    EXECUTE format('CREATE POLICY migrator ON opsdesk.audit_heads TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;
-- +goose StatementEnd
