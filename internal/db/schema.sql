-- The schema's current state, generated from the migrations by
-- TestSchemaFileIsTheMigratedSchema (internal/db/schema_test.go): do not edit.
-- After a migration: go test ./internal/db -run TestSchemaFile -update-schema
SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

-- Name: opsdesk; Type: SCHEMA; Schema: -; Owner: -

CREATE SCHEMA opsdesk;

-- Name: decision_result; Type: TYPE; Schema: opsdesk; Owner: -

CREATE TYPE opsdesk.decision_result AS (
	outcome text,
	code text,
	message text,
	tenant text,
	entry bigint,
	state text,
	version bigint
);

-- Name: purge_result; Type: TYPE; Schema: opsdesk; Owner: -

CREATE TYPE opsdesk.purge_result AS (
	outcome text,
	code text,
	message text,
	tenant text,
	entry bigint,
	run bigint,
	purged bigint,
	tombstones bigint
);

SET default_tablespace = '';

SET default_table_access_method = heap;

-- Name: audit; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.audit (
    tenant text NOT NULL,
    seq bigint NOT NULL,
    event_id uuid NOT NULL,
    at timestamp with time zone NOT NULL,
    role text NOT NULL,
    display_name text,
    action text NOT NULL,
    outcome text NOT NULL,
    tool text,
    key text,
    operation_id bigint,
    state_before text,
    state_after text,
    version_before bigint,
    version_after bigint,
    reason text,
    evidence_digest text,
    evidence_summary text,
    forced boolean NOT NULL,
    override boolean NOT NULL,
    details jsonb,
    prev_hash bytea,
    hash bytea NOT NULL,
    hash_version smallint NOT NULL,
    entry bigint,
    CONSTRAINT audit_evidence_length CHECK ((octet_length(evidence_summary) <= 2000)),
    CONSTRAINT audit_outcome CHECK ((outcome = ANY (ARRAY['succeeded'::text, 'denied'::text, 'failed'::text]))),
    CONSTRAINT audit_reason_length CHECK ((octet_length(reason) <= 2000))
);

ALTER TABLE ONLY opsdesk.audit FORCE ROW LEVEL SECURITY;

-- Name: operations; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.operations (
    tenant text NOT NULL,
    tool text NOT NULL,
    key text NOT NULL,
    id bigint NOT NULL,
    tool_version text NOT NULL,
    fingerprint bytea NOT NULL,
    effect text NOT NULL,
    state text NOT NULL,
    outcome text,
    owner text,
    attempt integer DEFAULT 1 NOT NULL,
    leased_at timestamp with time zone,
    lease_expires_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    expires_at timestamp with time zone,
    result json,
    result_ref text,
    version bigint DEFAULT 1 NOT NULL,
    conflict_count integer DEFAULT 0 NOT NULL,
    last_conflict_at timestamp with time zone,
    intent json,
    held boolean DEFAULT false NOT NULL,
    owner_role text DEFAULT SESSION_USER
);

ALTER TABLE ONLY opsdesk.operations FORCE ROW LEVEL SECURITY;

-- Name: about(opsdesk.audit, opsdesk.operations); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.about(a opsdesk.audit, o opsdesk.operations) RETURNS opsdesk.audit
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
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

-- Name: ack_conflicts(bigint, bigint[], text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.ack_conflicts(p_id bigint, p_seen bigint[], p_reason text, p_display_name text DEFAULT NULL::text) RETURNS opsdesk.decision_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '2s'
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
    a.outcome := 'succeeded';
    a.details := jsonb_build_object('conflicts', to_jsonb(ids[1:100]))
        || CASE WHEN cardinality(ids) > 100 THEN jsonb_build_object('count', cardinality(ids)) ELSE '{}' END;
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, a.state_after, o.version)::opsdesk.decision_result;
END
$$;

-- Name: audit_append(opsdesk.audit); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.audit_append(a opsdesk.audit) RETURNS opsdesk.audit
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT opsdesk.audit_write(a, session_user) $$;

-- Name: audit_append_only(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.audit_append_only() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RAISE EXCEPTION 'opsdesk.% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

-- Name: audit_hash(opsdesk.audit); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.audit_hash(a opsdesk.audit) RETURNS bytea
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
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

-- Name: audit_seal(text, bigint); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.audit_seal(p_tenant text DEFAULT NULL::text, p_entry bigint DEFAULT NULL::bigint, OUT sealed integer, OUT waiting bigint, OUT held_by text, OUT problem text, OUT seq bigint) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '250ms'
    AS $$
DECLARE
    n      integer;
    t      text;
    head   opsdesk.audit_heads;
    q      opsdesk.audit_queue;
    a      opsdesk.audit;
    every  boolean := opsdesk.sees_every_tenant();
    mine   text[] := opsdesk.visible_tenants();
BEGIN
    sealed := 0;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'seal the audit trail in a READ COMMITTED transaction, not %: it seals what others commit meanwhile',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state';
    ELSIF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'seal the audit trail in a transaction of its own: it seals what has committed'
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    FOR t IN
        SELECT DISTINCT u.tenant FROM opsdesk.audit_queue u
        UNION
        -- Refusal summaries due (summarize_refusals' condition).
        SELECT '' WHERE EXISTS (
            SELECT FROM opsdesk.refusal_windows w LEFT JOIN opsdesk.refusal_summaries s ON s.role = w.role
            WHERE w.counted > coalesce(s.counted, 0) AND (s.at IS NULL OR s.at <= clock_timestamp() - interval '1 minute'))
        ORDER BY 1
    LOOP
        -- The chain of the entry asked about is waited for (briefly: its
        -- sealer is sealing that entry too, or about to); others are left
        -- to whoever is sealing them.
        head := NULL;
        BEGIN
            IF t = p_tenant THEN
                SELECT * INTO head FROM opsdesk.audit_heads h WHERE h.tenant = t FOR UPDATE;
            ELSE
                SELECT * INTO head FROM opsdesk.audit_heads h WHERE h.tenant = t FOR UPDATE SKIP LOCKED;
            END IF;
            IF head.tenant IS NULL AND NOT EXISTS (SELECT FROM opsdesk.audit_heads h WHERE h.tenant = t) THEN
                INSERT INTO opsdesk.audit_heads (tenant, seq) VALUES (t, 0) RETURNING * INTO head;
            END IF;
        EXCEPTION WHEN unique_violation OR lock_not_available THEN
            head := NULL;
        END;
        IF head.tenant IS NULL THEN
            -- Another session is sealing this chain.
            IF every OR t = ANY (mine) THEN
                held_by := concat_ws('; ', held_by, opsdesk.lock_holder((SELECT h.xmax FROM opsdesk.audit_heads h WHERE h.tenant = t), 'opsdesk.audit_heads'));
            END IF;
            CONTINUE;
        END IF;
        -- Chain by chain: one that cannot be sealed (a constraint or a head
        -- row a superuser changed by hand) keeps its entries queued, and is
        -- named, while the others are sealed.
        n := 0;
        BEGIN
            IF t = '' THEN
                PERFORM opsdesk.summarize_refusals();
            END IF;
            FOR q IN SELECT * FROM opsdesk.audit_queue u WHERE u.tenant = t ORDER BY u.entry LOOP
                a := jsonb_populate_record(NULL::opsdesk.audit, to_jsonb(q));
                a.seq := head.seq + 1;
                a.prev_hash := head.hash;
                a.hash_version := 1;
                a.hash := opsdesk.audit_hash(a);
                INSERT INTO opsdesk.audit SELECT a.*;
                DELETE FROM opsdesk.audit_queue u WHERE u.tenant = t AND u.entry = q.entry;
                head.seq := a.seq;
                head.hash := a.hash;
                n := n + 1;
            END LOOP;
        EXCEPTION WHEN OTHERS THEN
            n := 0;
            IF every OR t = ANY (mine) THEN
                problem := concat_ws('; ', problem, 'chain ' || CASE WHEN t = '' THEN '''''' ELSE opsdesk.quoted(t, 40) END
                    || ' cannot be sealed at entry ' || q.entry || ': ' || opsdesk.cut(SQLERRM, 500));
            END IF;
        END;
        -- The head moves outside the block: a row updated by the top-level
        -- transaction names its session to lock_holder (one updated in a
        -- subtransaction would not).
        IF n > 0 THEN
            UPDATE opsdesk.audit_heads h SET seq = head.seq, hash = head.hash WHERE h.tenant = t;
        END IF;
        IF every OR t = ANY (mine) THEN
            sealed := sealed + n;
        END IF;
    END LOOP;
    SELECT count(*) INTO waiting FROM opsdesk.audit_queue u WHERE every OR u.tenant = ANY (mine);
    IF p_entry IS NOT NULL THEN
        SELECT s.seq INTO seq FROM opsdesk.audit s WHERE s.tenant = p_tenant AND s.entry = p_entry AND s.role = session_user;
    END IF;
END
$$;

-- Name: audit_write(opsdesk.audit, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.audit_write(a opsdesk.audit, p_role text) RETURNS opsdesk.audit
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    a.action := opsdesk.cut(a.action, 100);
    a.display_name := opsdesk.cut(a.display_name, 200);
    a.evidence_digest := opsdesk.cut(a.evidence_digest, 200);
    a.reason := opsdesk.cut(a.reason, 2000);
    a.evidence_summary := opsdesk.cut(a.evidence_summary, 2000);
    a.tool := opsdesk.cut(a.tool, 1000);
    a.key := opsdesk.cut(a.key, 1000);
    a.details := opsdesk.cut_details(a.details, 8000);
    a.seq := NULL;
    a.prev_hash := NULL;
    a.hash := NULL;
    a.hash_version := NULL;
    a.event_id := gen_random_uuid();
    a.at := clock_timestamp();
    a.role := p_role;
    a.forced := coalesce(a.forced, false);
    a.override := coalesce(a.override, false);
    INSERT INTO opsdesk.audit_queue (tenant, event_id, at, role, display_name, action, outcome, tool, key,
        operation_id, state_before, state_after, version_before, version_after, reason, evidence_digest,
        evidence_summary, forced, override, details)
    VALUES (a.tenant, a.event_id, a.at, a.role, a.display_name, a.action, a.outcome, a.tool, a.key,
        a.operation_id, a.state_before, a.state_after, a.version_before, a.version_after, a.reason,
        a.evidence_digest, a.evidence_summary, a.forced, a.override, a.details)
    RETURNING entry INTO a.entry;
    RETURN a;
END
$$;

-- Name: batch_of(jsonb); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.batch_of(d jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ BEGIN RETURN d->>'batch'; END $$;

-- Name: clean_input(text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.clean_input(p text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN octet_length(p) > 65536 THEN p ELSE opsdesk.clean_reason(p) END $$;

-- Name: clean_reason(text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.clean_reason(p text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$ SELECT nullif(regexp_replace(p, '^[[:space:]\u0085\u00a0\u1680\u180e\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]+|[[:space:]\u0085\u00a0\u1680\u180e\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]+$', '', 'g'), '') $_$;

-- Name: conflict_needs_record(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.conflict_needs_record() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- The lock keeps the record until this conflict commits: a purge
    -- skips it (SKIP LOCKED) or, having locked it first, makes this wait
    -- and then fail.
    -- By its id too: a conflict read before a purge and recorded after
    -- the identity was created again must not name the new record.
    PERFORM FROM opsdesk.operations
    WHERE tenant = NEW.tenant AND tool = NEW.tool AND key = NEW.key AND id = NEW.operation_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'insert or update on table "conflicts" violates foreign key constraint "conflicts_operation_fkey"'
            USING ERRCODE = 'foreign_key_violation', SCHEMA = 'opsdesk', TABLE = 'conflicts',
                CONSTRAINT = 'conflicts_operation_fkey',
                DETAIL = format('Key (tenant, tool, key)=(%s, %s, %s) with id %s is not present in table "operations".',
                    NEW.tenant, NEW.tool, NEW.key, NEW.operation_id);
    END IF;
    RETURN NULL;
END
$$;

-- Name: cut(text, integer); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.cut(p text, p_bytes integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN octet_length(p) <= p_bytes THEN p ELSE left(p, (p_bytes - 12) / 4) || '… (cut)' END $$;

-- Name: cut_details(jsonb, integer); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.cut_details(d jsonb, p_bytes integer) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN octet_length(d::text) <= p_bytes THEN d
                  ELSE jsonb_build_object('cut', left((d - 'reconciler' - 'batch' - 'claimed_batch' - 'tenant')::text, (p_bytes - 400) / 4))
                       || jsonb_strip_nulls(jsonb_build_object(
                              'reconciler', CASE WHEN jsonb_typeof(d->'reconciler') = 'boolean' THEN d->'reconciler' END,
                              'batch', CASE WHEN octet_length(d->>'batch') <= 64 THEN d->'batch' END,
                              'claimed_batch', CASE WHEN octet_length(d->>'claimed_batch') <= 64 THEN d->'claimed_batch' END,
                              'tenant', CASE WHEN octet_length(d->>'tenant') <= 128 THEN d->'tenant' END)) END $$;

-- Name: decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamp with time zone, text, text, uuid); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.decide(p_id bigint, p_decision text, p_expect_version bigint, p_reason text, p_result_ref text DEFAULT NULL::text, p_result jsonb DEFAULT NULL::jsonb, p_evidence_digest text DEFAULT NULL::text, p_evidence_summary text DEFAULT NULL::text, p_lookup text DEFAULT NULL::text, p_force boolean DEFAULT false, p_override boolean DEFAULT false, p_retention interval DEFAULT '7 days'::interval, p_snooze_until timestamp with time zone DEFAULT NULL::timestamp with time zone, p_display_name text DEFAULT NULL::text, p_lookup_ref text DEFAULT NULL::text, p_batch uuid DEFAULT NULL::uuid) RETURNS opsdesk.decision_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '2s'
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
$$;

-- Name: fingerprint_tags(bigint); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.fingerprint_tags(p_id bigint) RETURNS TABLE(conflict_id bigint, tag text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
WITH k AS (SELECT value FROM opsdesk.secrets WHERE name = 'fingerprint_tag'),
     o AS (SELECT tenant, tool, key, fingerprint FROM opsdesk.operations WHERE id = p_id)
SELECT NULL::bigint, 'fp:' || encode(substr(sha256(k.value || o.fingerprint), 1, 6), 'hex') FROM k, o
UNION ALL
SELECT c.id, 'fp:' || encode(substr(sha256(k.value || c.fingerprint), 1, 6), 'hex')
FROM k, o JOIN opsdesk.conflicts c ON c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key
$$;

-- Name: grant_access(text, text, text, text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.grant_access(p_role text, p_level text, p_tenant text, p_reason text, p_display_name text DEFAULT NULL::text) RETURNS opsdesk.decision_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '2s'
    AS $$
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
$$;

-- Name: lock_holder(xid, regclass); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.lock_holder(p_xmax xid, p_rel regclass) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    xids xid[] := ARRAY[p_xmax];
    who  text;
BEGIN
    BEGIN
        xids := xids || ARRAY(SELECT m.xid FROM pg_get_multixact_members(p_xmax) m);
    EXCEPTION WHEN OTHERS THEN
        NULL; -- not a MultiXactId (or one long gone): the xid alone
    END;
    SELECT string_agg(DISTINCT quote_ident(s.usename::text) || ' (pid ' || l.pid || ')', ', ') INTO who
    FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
    WHERE l.locktype = 'transactionid' AND l.transactionid = ANY (xids) AND l.granted AND l.mode = 'ExclusiveLock'
      AND l.pid <> pg_backend_pid()
      AND EXISTS (SELECT FROM pg_locks r WHERE r.pid = l.pid AND r.locktype = 'relation' AND r.relation = p_rel AND r.granted);
    RETURN coalesce(who, 'another session');
END
$$;

-- Name: may_purge(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.may_purge() RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT pg_has_role(session_user, 'opsdesk_admin', 'MEMBER') AND opsdesk.sees_every_tenant() $$;

-- Name: operations_state_machine(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.operations_state_machine() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- The insert a service makes (reserveSQL, DoTx's insertCompletedSQL),
    -- every rule below met: checked here, not in a WHEN condition or in
    -- CHECK constraints, because PL/pgSQL plans an expression once per
    -- session, while the server prepares a WHEN condition and every CHECK
    -- again for each statement (issue 20). Leased within the ten seconds
    -- before the clock, for at most 24 hours; the completed insert
    -- completed at the same instant, kept at most 876,600 hours. The
    -- columns the service cannot insert keep their defaults (owner_role is
    -- the login); version and conflict_count are checked for the table's
    -- owner, who can write them. Each bound's arithmetic is on a time
    -- already checked, so none overflows.
    IF TG_OP = 'INSERT' AND coalesce(NEW.attempt = 1 AND NEW.version = 1 AND NEW.conflict_count = 0
        AND octet_length(NEW.key) BETWEEN 1 AND 255 AND octet_length(NEW.fingerprint) = 32
        AND NEW.leased_at BETWEEN clock_timestamp() - interval '10 seconds' AND clock_timestamp()
        AND NEW.lease_expires_at BETWEEN NEW.leased_at AND NEW.leased_at + interval '24 hours'
        AND current_setting('is_superuser') = 'off'
        AND CASE NEW.state
            WHEN 'pending' THEN NEW.owner IS NOT NULL AND NEW.outcome IS NULL AND NEW.result IS NULL
                AND NEW.result_ref IS NULL AND NEW.completed_at IS NULL AND NEW.expires_at IS NULL
                AND NEW.effect IN ('local', 'external_idempotent', 'external_unknown')
            WHEN 'completed' THEN NEW.effect = 'local' AND NEW.outcome IN ('succeeded', 'rejected')
                AND NEW.completed_at = NEW.leased_at
                AND NEW.expires_at BETWEEN NEW.completed_at AND NEW.completed_at + interval '876600 hours'
            END, false) THEN
        RETURN NEW;
    END IF;
    DECLARE
        -- OLD with the columns the step may change taken from NEW: the row the
        -- step must produce, compared with NEW as a whole.
        e    opsdesk.operations;
        rule text;
        -- The database clock at this write (not at the transaction's start),
        -- and the bounds of the times the service writes.
        c        timestamptz := clock_timestamp();
        since    timestamptz := c - interval '10 seconds';
        lease_to timestamptz := c + interval '24 hours';
        keep_to  timestamptz := c + interval '876600 hours';
        now_is   constant text := 'within the ten seconds before the database clock';
        -- Set once the step is allowed; the table's rules are still checked.
        done boolean := false;
        bad  text;
    BEGIN
        IF current_setting('is_superuser') = 'on' THEN
            -- A superuser's record is no service login's lease. A superuser
            -- is held to the table's rules only (below).
            IF TG_OP = 'INSERT' AND NEW.owner_role = session_user THEN
                NEW.owner_role := NULL;
            END IF;
            done := true;

        ELSIF current_user = 'opsdesk_owner' THEN
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
                done := true;
            END IF;

        ELSIF TG_OP = 'INSERT' THEN
            IF NEW.attempt <> 1 OR NEW.version <> 1 OR NEW.conflict_count <> 0 OR NEW.held
               OR NEW.last_conflict_at IS NOT NULL OR NEW.created_at <> now() OR NEW.updated_at <> now() THEN
                rule := 'a new record is attempt 1, version 1, with no conflicts';
            ELSIF NOT coalesce(NEW.leased_at BETWEEN since AND c, false) THEN
                rule := 'a new record is leased from now: leased_at ' || now_is || ', not ' || coalesce(NEW.leased_at::text, 'NULL');
            ELSIF NOT coalesce(NEW.lease_expires_at BETWEEN NEW.leased_at AND lease_to, false) THEN
                rule := 'a new record is leased for at most 24 hours: its lease ends no earlier than it starts and at most '
                    || '24 hours after the database clock, not at '
                    || coalesce(NEW.lease_expires_at::text, 'NULL');
            ELSIF NEW.state = 'pending' AND (NEW.outcome IS NOT NULL OR NEW.result IS NOT NULL
                  OR NEW.result_ref IS NOT NULL OR NEW.completed_at IS NOT NULL OR NEW.expires_at IS NOT NULL) THEN
                rule := 'a new record that is pending has no outcome';
            ELSIF NEW.state = 'completed' AND NEW.effect <> 'local' THEN
                rule := 'a new record is completed only by a local transaction (effect local)';
            ELSIF NEW.state NOT IN ('pending', 'completed') THEN
                rule := 'a new record is pending, or completed by a local transaction';
            ELSIF NEW.state = 'pending' THEN
                NEW.owner_role := session_user;
                done := true;
            END IF;
            -- A completed insert: its completion, checked below as an update's.

        ELSE
            e := OLD;
            IF NEW.attempt <> OLD.attempt THEN
                IF OLD.held THEN
                    rule := 'a record under legal hold is not taken over';
                ELSIF NOT (OLD.state = 'released' OR (OLD.state = 'pending' AND OLD.lease_expires_at <= c
                           AND OLD.effect = 'external_idempotent' AND NEW.effect = 'external_idempotent')) THEN
                    rule := 'only a released record, or a pending one whose lease expired and whose provider '
                        || 'deduplicates by key, is taken over; a ' || OLD.state || ' ' || OLD.effect || ' record is not';
                ELSIF NEW.state <> 'pending' OR NEW.attempt <> OLD.attempt + 1 OR NEW.version <> OLD.version + 1 THEN
                    rule := 'a takeover is the next attempt of a pending record (attempt and version + 1), leased from now';
                ELSIF NOT coalesce(NEW.leased_at BETWEEN since AND c AND NEW.updated_at BETWEEN since AND c, false) THEN
                    rule := 'a takeover is leased from now: leased_at and updated_at ' || now_is || ', not '
                        || coalesce(NEW.leased_at::text, 'NULL') || ' and ' || coalesce(NEW.updated_at::text, 'NULL');
                ELSIF NOT coalesce(NEW.lease_expires_at BETWEEN NEW.leased_at AND lease_to, false) THEN
                    rule := 'a takeover is leased for at most 24 hours: its lease ends no earlier than it starts and at most '
                        || '24 hours after the database clock, not at '
                        || coalesce(NEW.lease_expires_at::text, 'NULL');
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
                ELSIF NEW.version <> OLD.version + 1 OR NOT coalesce(NEW.updated_at BETWEEN since AND c, false) THEN
                    rule := 'completing or releasing a record raises its version by one, updated now (updated_at '
                        || now_is || ', not ' || coalesce(NEW.updated_at::text, 'NULL') || ')';
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
                ELSIF NOT coalesce(NEW.lease_expires_at BETWEEN since AND lease_to, false) THEN
                    rule := 'a lease is renewed while it is live, and never ends in the past: it ends from ten seconds before '
                        || 'to 24 hours after the database clock, not at ' || coalesce(NEW.lease_expires_at::text, 'NULL');
                ELSIF NEW.lease_expires_at > OLD.lease_expires_at AND OLD.lease_expires_at <= c THEN
                    rule := 'a lease is renewed while it is live, and never ends in the past';
                END IF;
                e.lease_expires_at := NEW.lease_expires_at;
            END IF;
            IF NEW.conflict_count <> OLD.conflict_count OR NEW.last_conflict_at IS DISTINCT FROM OLD.last_conflict_at THEN
                IF NEW.conflict_count <> OLD.conflict_count + 1 OR NOT coalesce(NEW.last_conflict_at BETWEEN since AND c, false) THEN
                    rule := coalesce(rule, 'a conflict is counted one at a time, now (last_conflict_at ' || now_is || ', not '
                        || coalesce(NEW.last_conflict_at::text, 'NULL') || ')');
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
        END IF;

        -- A completion, by an update or a local transaction's insert.
        IF rule IS NULL AND NOT done AND NEW.state = 'completed' AND (TG_OP = 'INSERT' OR OLD.state = 'pending') THEN
            IF NOT coalesce(NEW.completed_at BETWEEN since AND c, false) THEN
                rule := CASE TG_OP WHEN 'INSERT' THEN 'a new record' ELSE 'a record' END || ' is completed now: completed_at '
                    || now_is || ', not ' || coalesce(NEW.completed_at::text, 'NULL');
            ELSIF NOT coalesce(NEW.expires_at BETWEEN NEW.completed_at AND keep_to, false) THEN
                rule := CASE TG_OP WHEN 'INSERT' THEN 'a new record' ELSE 'a record' END || ' is completed now, to expire '
                    || 'no earlier than now (its completed_at) and at most 876600 hours (100 years) after the database clock, '
                    || 'not at ' || coalesce(NEW.expires_at::text, 'NULL');
            END IF;
        END IF;
        IF rule IS NULL THEN
            IF TG_OP = 'INSERT' AND NOT done THEN
                NEW.owner_role := session_user;
            END IF;
            -- The table's rules, which were its CHECK constraints until
            -- migration 00026, for every writer: refused as those were, with
            -- their names, in the order the server checked them (by name).
            -- Each refuses only a false condition, as a CHECK does. All of
            -- them in one expression first: a superuser's bulk load pays one
            -- evaluation a row, not ten.
            IF (NEW.attempt >= 1) IS NOT FALSE
               AND (NEW.state <> 'completed' OR NEW.expires_at IS NOT NULL) IS NOT FALSE
               AND (NEW.conflict_count >= 0) IS NOT FALSE
               AND (NEW.effect IN ('local', 'external_idempotent', 'external_unknown')) IS NOT FALSE
               AND (octet_length(NEW.fingerprint) = 32) IS NOT FALSE
               AND (octet_length(NEW.key) BETWEEN 1 AND 255) IS NOT FALSE
               AND ((NEW.state = 'completed' AND NEW.outcome IN ('succeeded', 'rejected') AND NEW.completed_at IS NOT NULL)
                    OR (NEW.state <> 'completed' AND NEW.outcome IS NULL)) IS NOT FALSE
               AND (NEW.state <> 'pending'
                    OR (NEW.owner IS NOT NULL AND NEW.leased_at IS NOT NULL AND NEW.lease_expires_at IS NOT NULL)) IS NOT FALSE
               AND (NEW.state IN ('pending', 'completed', 'released')) IS NOT FALSE
               AND (NEW.version >= 1) IS NOT FALSE THEN
                RETURN NEW;
            END IF;
            IF NOT (NEW.attempt >= 1) THEN
                bad := 'operations_attempt';
            ELSIF NOT (NEW.state <> 'completed' OR NEW.expires_at IS NOT NULL) THEN
                bad := 'operations_completed_expiry';
            ELSIF NOT (NEW.conflict_count >= 0) THEN
                bad := 'operations_conflict_count';
            ELSIF NOT (NEW.effect IN ('local', 'external_idempotent', 'external_unknown')) THEN
                bad := 'operations_effect';
            ELSIF NOT (octet_length(NEW.fingerprint) = 32) THEN
                bad := 'operations_fingerprint_length';
            ELSIF NOT (octet_length(NEW.key) BETWEEN 1 AND 255) THEN
                bad := 'operations_key_length';
            ELSIF NOT ((NEW.state = 'completed' AND NEW.outcome IN ('succeeded', 'rejected') AND NEW.completed_at IS NOT NULL)
                       OR (NEW.state <> 'completed' AND NEW.outcome IS NULL)) THEN
                bad := 'operations_outcome';
            ELSIF NOT (NEW.state <> 'pending'
                       OR (NEW.owner IS NOT NULL AND NEW.leased_at IS NOT NULL AND NEW.lease_expires_at IS NOT NULL)) THEN
                bad := 'operations_pending_lease';
            ELSIF NOT (NEW.state IN ('pending', 'completed', 'released')) THEN
                bad := 'operations_state';
            ELSE
                bad := 'operations_version';
            END IF;
            RAISE EXCEPTION 'new row for relation "operations" violates check constraint "%"', bad
                USING ERRCODE = 'check_violation', SCHEMA = 'opsdesk', TABLE = 'operations', CONSTRAINT = bad;
        END IF;

        IF rule LIKE '%database clock%' THEN
            RAISE EXCEPTION 'opsdesk.operations record % (%): %', NEW.id, CASE TG_OP WHEN 'INSERT' THEN 'new' ELSE OLD.state END, rule
                USING ERRCODE = 'check_violation', SCHEMA = 'opsdesk', TABLE = 'operations',
                    CONSTRAINT = 'operations_state_machine',
                    DETAIL = 'The database clock (clock_timestamp()) read ' || c || '.',
                    HINT = 'Write the times a step sets with clock_timestamp() (not now(), the transaction''s start), as the '
                        || 'library does: a lease of at most 24 hours, a retention of at most 876600 hours (100 years), '
                        || 'nothing infinite.';
        END IF;
        RAISE EXCEPTION 'opsdesk.operations record % (%): %', NEW.id, CASE TG_OP WHEN 'INSERT' THEN 'new' ELSE OLD.state END, rule
            USING ERRCODE = 'check_violation', SCHEMA = 'opsdesk', TABLE = 'operations',
                CONSTRAINT = 'operations_state_machine',
                HINT = 'The library''s steps are allowed; a person changes a record through the console (opsdesk ops).';
    END;
END
$$;

-- Name: purge_batch(bigint, integer); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.purge_batch(p_run bigint, p_limit integer) RETURNS opsdesk.purge_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

-- Name: purge_finish(bigint, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.purge_finish(p_run bigint, p_display_name text DEFAULT NULL::text) RETURNS opsdesk.purge_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    a.details := jsonb_strip_nulls(jsonb_build_object('run', r.id, 'start_entry', r.start_entry,
        'last_resume_entry', nullif(r.audit_entry, r.start_entry), 'before', r.before, 'tool', r.tool,
        'promised', r.promised, 'may_purge', r.may_purge,
        'purged', r.purged, 'per_tenant', r.per_tenant, 'first_id', r.first_id, 'last_id', r.last_id,
        'batches', r.batches, 'started_at', r.started_at, 'started_by', r.role, 'tombstone_for', r.tombstone_for,
        'tombstones_expired', r.tombstones_expired));
    a := opsdesk.audit_append(a);
    RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, r.id, r.purged, r.tombstones_expired)::opsdesk.purge_result;
END
$$;

-- Name: purge_refused(opsdesk.decision_result, bigint); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.purge_refused(d opsdesk.decision_result, p_run bigint) RETURNS opsdesk.purge_result
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT (d.outcome, d.code, d.message, d.tenant, d.entry, p_run, NULL, NULL)::opsdesk.purge_result $$;

-- Name: purge_runs; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.purge_runs (
    id bigint NOT NULL,
    role text NOT NULL,
    tool text,
    before timestamp with time zone NOT NULL,
    tombstone_for jsonb NOT NULL,
    reason text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    batches integer DEFAULT 0 NOT NULL,
    purged bigint DEFAULT 0 NOT NULL,
    first_id bigint,
    last_id bigint,
    per_tenant jsonb DEFAULT '{}'::jsonb NOT NULL,
    tombstones_expired bigint DEFAULT 0 NOT NULL,
    display_name text,
    promised bigint,
    may_purge bigint,
    start_seq bigint,
    audit_seq bigint,
    audited_xact xid8,
    start_entry bigint,
    audit_entry bigint,
    CONSTRAINT purge_runs_reason CHECK (((octet_length(reason) >= 1) AND (octet_length(reason) <= 2000)))
);

ALTER TABLE ONLY opsdesk.purge_runs FORCE ROW LEVEL SECURITY;

-- Name: purge_run_for_delete(opsdesk.audit, bigint, integer, boolean); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.purge_run_for_delete(a opsdesk.audit, p_run bigint, p_limit integer, p_exclusive boolean, OUT run opsdesk.purge_runs, OUT refusal opsdesk.purge_result) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
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

-- Name: purge_start(text, timestamp with time zone, jsonb, text, bigint, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.purge_start(p_tool text, p_before timestamp with time zone, p_tombstone_for jsonb, p_reason text, p_promised bigint, p_display_name text DEFAULT NULL::text) RETURNS opsdesk.purge_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
        a.details := jsonb_strip_nulls(jsonb_build_object('run', r.id, 'start_entry', r.start_entry,
            'started_by', r.role, 'started_at', r.started_at, 'tool', r.tool, 'before', r.before,
            'tombstone_for', r.tombstone_for, 'purged_so_far', so_far, 'promised', p_promised,
            'may_purge', so_far + p_promised));
        a := opsdesk.audit_append(a);
        UPDATE opsdesk.purge_runs
        SET may_purge = so_far + p_promised, audit_entry = a.entry, audited_xact = pg_current_xact_id()
        WHERE id = r.id;
        RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, r.id, so_far, NULL)::opsdesk.purge_result;
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
    UPDATE opsdesk.purge_runs SET start_entry = a.entry, audit_entry = a.entry WHERE id = r.id;
    RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, r.id, 0, NULL)::opsdesk.purge_result;
END
$$;

-- Name: purge_tombstones(bigint, integer); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.purge_tombstones(p_run bigint, p_limit integer) RETURNS opsdesk.purge_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

-- Name: quoted(text, integer); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.quoted(p text, p_chars integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN p IS NULL THEN 'NULL'
                  WHEN left(p, p_chars) = p THEN quote_literal(p)
                  ELSE quote_literal(left(p, p_chars)) || '…' END $$;

-- Name: record_conflicts_refresh(text, text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.record_conflicts_refresh(p_tenant text, p_tool text, p_key text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    o record;
BEGIN
    SELECT state, held, expires_at, conflict_count INTO o FROM opsdesk.operations
    WHERE tenant = p_tenant AND tool = p_tool AND key = p_key
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        DELETE FROM opsdesk.record_conflicts WHERE tenant = p_tenant AND tool = p_tool AND key = p_key;
        RETURN;
    END IF;
    INSERT INTO opsdesk.record_conflicts AS r (tenant, tool, key, unreviewed, tracked, state, held, expires_at)
    VALUES (p_tenant, p_tool, p_key,
        EXISTS (SELECT FROM opsdesk.conflicts c
                WHERE c.tenant = p_tenant AND c.tool = p_tool AND c.key = p_key AND c.reviewed_at IS NULL),
        o.conflict_count > 0, o.state, o.held, o.expires_at)
    ON CONFLICT (tenant, tool, key) DO UPDATE
    SET unreviewed = EXCLUDED.unreviewed, tracked = EXCLUDED.tracked, state = EXCLUDED.state,
        held = EXCLUDED.held, expires_at = EXCLUDED.expires_at;
END
$$;

-- Name: record_conflicts_track(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.record_conflicts_track() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' AND TG_TABLE_NAME = 'operations' THEN
        DELETE FROM opsdesk.record_conflicts;
        RETURN NULL;
    ELSIF TG_OP = 'TRUNCATE' THEN
        -- Conflicts truncated: no record has any left.
        UPDATE opsdesk.record_conflicts SET unreviewed = false WHERE unreviewed;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM opsdesk.record_conflicts_refresh(OLD.tenant, OLD.tool, OLD.key);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE')
        AND (TG_OP = 'INSERT' OR (OLD.tenant, OLD.tool, OLD.key) IS DISTINCT FROM (NEW.tenant, NEW.tool, NEW.key)) THEN
        PERFORM opsdesk.record_conflicts_refresh(NEW.tenant, NEW.tool, NEW.key);
    END IF;
    RETURN NULL;
END
$$;

-- Name: record_tool_policy(text, text, bigint, bigint, bigint, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.record_tool_policy(p_tool text, p_effect text, p_lease_us bigint, p_retention_us bigint, p_retry_window_us bigint, p_after_expiry text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    old   opsdesk.tool_policies;
    shown text := quote_literal(coalesce(regexp_replace(left(p_tool, 128), '[[:cntrl:]]', '?', 'g'), ''));
BEGIN
    IF p_tool IS NULL OR octet_length(p_tool) NOT BETWEEN 1 AND 128 OR p_tool ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'tool policy: the tool name % is empty, longer than 128 bytes or holds a control character', shown
            USING ERRCODE = 'check_violation';
    END IF;
    IF p_effect IS NULL OR p_effect NOT IN ('local', 'external_idempotent', 'external_unknown') THEN
        RAISE EXCEPTION 'tool policy of %: effect % is not one of local, external_idempotent, external_unknown',
            shown, quote_nullable(left(p_effect, 40)) USING ERRCODE = 'check_violation';
    END IF;
    IF p_lease_us IS NULL OR p_lease_us NOT BETWEEN 100000 AND 86400000000 THEN
        RAISE EXCEPTION 'tool policy of %: lease of % microseconds is outside 100ms to 24 hours', shown, p_lease_us
            USING ERRCODE = 'check_violation';
    END IF;
    IF p_retention_us IS NULL OR p_retention_us NOT BETWEEN 1 AND 3155760000000000 THEN
        RAISE EXCEPTION 'tool policy of %: retention of % microseconds is outside 1 microsecond to 876600 hours (100 years)',
            shown, p_retention_us USING ERRCODE = 'check_violation';
    END IF;
    IF p_retry_window_us IS NULL OR p_retry_window_us NOT BETWEEN 1 AND 3155760000000000 THEN
        RAISE EXCEPTION 'tool policy of %: retry window of % microseconds is outside 1 microsecond to 876600 hours (100 years)',
            shown, p_retry_window_us USING ERRCODE = 'check_violation';
    END IF;
    IF p_after_expiry IS NULL OR p_after_expiry NOT IN ('reexecute', 'reject') THEN
        RAISE EXCEPTION 'tool policy of %: after expiry % is not one of reexecute, reject',
            shown, quote_nullable(left(p_after_expiry, 40)) USING ERRCODE = 'check_violation';
    END IF;

    -- One writer at a time: the count below and the comparison with the
    -- row replaced see every committed policy. Services write here when
    -- they start, never on a request's path.
    LOCK TABLE opsdesk.tool_policies IN SHARE ROW EXCLUSIVE MODE;
    SELECT * INTO old FROM opsdesk.tool_policies WHERE tool = p_tool;
    IF NOT FOUND THEN
        IF (SELECT count(*) FROM opsdesk.tool_policies) >= 1000 THEN
            RAISE EXCEPTION 'tool policy of %: the store records at most 1000 tools', shown
                USING ERRCODE = 'program_limit_exceeded';
        END IF;
        INSERT INTO opsdesk.tool_policies
            (tool, effect, lease_us, retention_us, retry_window_us, after_expiry, recorded_by, recorded_at)
        VALUES (p_tool, p_effect, p_lease_us, p_retention_us, p_retry_window_us, p_after_expiry,
                session_user, clock_timestamp());
    ELSIF (old.effect, old.lease_us, old.retention_us, old.retry_window_us, old.after_expiry)
          = (p_effect, p_lease_us, p_retention_us, p_retry_window_us, p_after_expiry) THEN
        UPDATE opsdesk.tool_policies SET recorded_by = session_user, recorded_at = clock_timestamp()
        WHERE tool = p_tool;
    ELSE
        UPDATE opsdesk.tool_policies
        SET effect = p_effect, lease_us = p_lease_us, retention_us = p_retention_us,
            retry_window_us = p_retry_window_us, after_expiry = p_after_expiry,
            previous = jsonb_build_object('effect', old.effect, 'lease_us', old.lease_us,
                'retention_us', old.retention_us, 'retry_window_us', old.retry_window_us,
                'after_expiry', old.after_expiry, 'recorded_by', old.recorded_by, 'recorded_at', old.recorded_at),
            changed_at = clock_timestamp(), recorded_by = session_user, recorded_at = clock_timestamp()
        WHERE tool = p_tool;
    END IF;
END
$$;

-- Name: records_keep_conflicts(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.records_keep_conflicts() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    c record;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        SELECT tenant, tool, key INTO c FROM opsdesk.conflicts LIMIT 1;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT OLD.tenant, OLD.tool, OLD.key INTO c
        WHERE EXISTS (SELECT FROM opsdesk.conflicts x WHERE x.tenant = OLD.tenant AND x.tool = OLD.tool AND x.key = OLD.key);
    ELSE
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'delete operation records in a READ COMMITTED transaction, not %',
                upper(current_setting('transaction_isolation'))
                USING ERRCODE = 'invalid_transaction_state',
                    HINT = 'The check that no conflict points at them reads the latest committed conflicts.';
        END IF;
        SELECT g.tenant, g.tool, g.key INTO c FROM gone g
        WHERE EXISTS (SELECT FROM opsdesk.conflicts x WHERE x.tenant = g.tenant AND x.tool = g.tool AND x.key = g.key)
        LIMIT 1;
    END IF;
    IF FOUND THEN
        RAISE EXCEPTION '% on table "operations" violates foreign key constraint "conflicts_operation_fkey" on table "conflicts"',
            CASE TG_OP WHEN 'DELETE' THEN 'update or delete' ELSE lower(TG_OP) END
            USING ERRCODE = 'foreign_key_violation', SCHEMA = 'opsdesk', TABLE = 'operations',
                CONSTRAINT = 'conflicts_operation_fkey',
                DETAIL = format('Key (tenant, tool, key)=(%s, %s, %s) is still referenced from table "conflicts".',
                    c.tenant, c.tool, c.key);
    END IF;
    IF TG_OP = 'UPDATE' THEN
        RETURN NEW;
    END IF;
    RETURN NULL;
END
$$;

-- Name: refuse(opsdesk.audit, text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.refuse(a opsdesk.audit, p_code text, p_message text) RETURNS opsdesk.decision_result
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
$$;

-- Name: reveal_claim(text, bigint, text[]); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.reveal_claim(p_tenant text, p_entry bigint, p_actions text[]) RETURNS opsdesk.audit
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    a opsdesk.audit;
BEGIN
    -- Before this function writes: a transaction that wrote nothing yet
    -- cannot be the request's own, whose audit entry it would hold.
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'a reveal is fetched in a transaction of its own, after its request''s committed'
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    IF p_tenant IS NULL OR p_entry IS NULL OR p_entry < 1 THEN
        RAISE EXCEPTION 'a reveal is named by its audit entry: a chain and an entry number from 1 up'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        RAISE EXCEPTION '% may not reveal stored values: it is not granted opsdesk_operator', quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Queued, else sealed: the sealer moves an entry in one transaction,
    -- so one of the two statements sees it.
    SELECT (jsonb_populate_record(NULL::opsdesk.audit, to_jsonb(q))).* INTO a FROM opsdesk.audit_queue q
    WHERE q.tenant = p_tenant AND q.entry = p_entry AND q.role = session_user AND q.outcome = 'succeeded'
      AND q.action = ANY (p_actions) AND q.at > clock_timestamp() - interval '1 minute';
    IF NOT FOUND THEN
        SELECT * INTO a FROM opsdesk.audit s
        WHERE s.tenant = p_tenant AND s.entry = p_entry AND s.role = session_user AND s.outcome = 'succeeded'
          AND s.action = ANY (p_actions) AND s.at > clock_timestamp() - interval '1 minute';
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no reveal % by % in the last minute', opsdesk.reveal_name(p_tenant, p_entry), quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN a;
END
$$;

-- Name: reveal_conflict_fetch(text, bigint); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.reveal_conflict_fetch(p_tenant text, p_entry bigint) RETURNS TABLE(original_request json, attempted_request json, original_fingerprinted boolean, attempted_fingerprinted boolean, original_missing text, attempted_missing text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    a           opsdesk.audit := opsdesk.reveal_claim(p_tenant, p_entry, ARRAY['reveal:conflict']);
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

-- Name: reveal_conflict_request(bigint, text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.reveal_conflict_request(p_conflict_id bigint, p_reason text, p_display_name text DEFAULT NULL::text) RETURNS opsdesk.decision_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, a.state_after, o.version)::opsdesk.decision_result;
END
$$;

-- Name: reveal_fetch(text, bigint); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.reveal_fetch(p_tenant text, p_entry bigint) RETURNS json
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    a opsdesk.audit := opsdesk.reveal_claim(p_tenant, p_entry, ARRAY['reveal:intent', 'reveal:result']);
    v json;
BEGIN
    -- Row-level security: the record must still be visible.
    SELECT CASE a.action WHEN 'reveal:intent' THEN o.intent ELSE o.result END INTO v
    FROM opsdesk.operations o WHERE o.tenant = a.tenant AND o.id = a.operation_id;
    PERFORM opsdesk.reveal_mark(a, FOUND);
    RETURN v;
END
$$;

-- Name: reveal_fetch_counts(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.reveal_fetch_counts(OUT attempted bigint, OUT recorded bigint) RETURNS record
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM opsdesk.reveal_fetch_attempts),
    (SELECT count(*) FROM opsdesk.reveal_fetches WHERE entry IS NOT NULL)
WHERE opsdesk.sees_every_tenant()
$$;

-- Name: reveal_mark(opsdesk.audit, boolean); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.reveal_mark(a opsdesk.audit, p_visible boolean) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF NOT coalesce(p_visible, false) THEN
        RAISE EXCEPTION 'the record of reveal % is no longer visible to %', opsdesk.reveal_name(a.tenant, a.entry), quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Counted where no rollback takes it back (a sequence): a fetch in a
    -- transaction rolled back leaves no row in reveal_fetches, and may be
    -- fetched again, but leaves this count above the rows'.
    PERFORM nextval('opsdesk.reveal_fetch_attempts');
    INSERT INTO opsdesk.reveal_fetches (tenant, entry, role, fetched_at)
    VALUES (a.tenant, a.entry, session_user, clock_timestamp()) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reveal % was fetched already: a reveal shows its value once; reveal it again (it is audited again)',
            opsdesk.reveal_name(a.tenant, a.entry)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

-- Name: reveal_name(text, bigint); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.reveal_name(p_tenant text, p_entry bigint) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN p_tenant = '' THEN '''''' ELSE opsdesk.quoted(p_tenant, 40) END || ' entry ' || p_entry $$;

-- Name: reveal_request(bigint, text, text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.reveal_request(p_id bigint, p_field text, p_reason text, p_display_name text DEFAULT NULL::text) RETURNS opsdesk.decision_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    RETURN ('succeeded', NULL, NULL, a.tenant, a.entry, a.state_after, o.version)::opsdesk.decision_result;
END
$$;

-- Name: sees_every_tenant(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.sees_every_tenant() RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
SELECT EXISTS (SELECT FROM opsdesk.access WHERE role = session_user AND tenant = '*')
    OR EXISTS (SELECT FROM pg_roles WHERE rolname = session_user AND rolsuper)
$$;

-- Name: set_auto_reconcile(text, text[], text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.set_auto_reconcile(p_tool text, p_verdicts text[], p_reason text, p_display_name text DEFAULT NULL::text) RETURNS opsdesk.decision_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '2s'
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

-- Name: set_hold(bigint[], boolean, text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.set_hold(p_ids bigint[], p_hold boolean, p_reason text, p_display_name text DEFAULT NULL::text, OUT outcome text, OUT code text, OUT message text, OUT audit_tenant text, OUT audit_entry bigint, OUT changed integer, OUT unchanged integer, OUT missing bigint[]) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '2s'
    AS $$
DECLARE
    o     opsdesk.operations;
    a     opsdesk.audit;
    d     opsdesk.decision_result;
    ids   bigint[];
    busy  text;
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
        SELECT d.outcome, d.code, d.message, d.tenant, d.entry INTO outcome, code, message, audit_tenant, audit_entry;
        RETURN;
    END IF;
    ids := ARRAY(SELECT DISTINCT i FROM unnest(p_ids) i ORDER BY i);
    -- Row-level security: records of tenants the admin does not see are
    -- missing too.
    missing := ARRAY(SELECT i FROM unnest(ids) i WHERE NOT EXISTS (SELECT FROM opsdesk.operations r WHERE r.id = i) ORDER BY i);
    IF cardinality(missing) = 0 THEN
        BEGIN
            -- Locked, then compared again: a record purged since the first
            -- look is missing, not silently skipped.
            PERFORM FROM opsdesk.operations WHERE id = ANY (ids) ORDER BY id FOR UPDATE;
            missing := ARRAY(SELECT i FROM unnest(ids) i WHERE NOT EXISTS (SELECT FROM opsdesk.operations r WHERE r.id = i) ORDER BY i);
            IF cardinality(missing) > 0 THEN
                -- Let the rows go before refusing.
                RAISE EXCEPTION 'refused after locking' USING ERRCODE = 'OPS01';
            END IF;
        EXCEPTION WHEN SQLSTATE 'OPS01' THEN
            NULL;
        WHEN lock_not_available THEN
            busy := 'a record of the hold is held by '
                || coalesce((SELECT string_agg(DISTINCT opsdesk.lock_holder(r.xmax, 'opsdesk.operations'), '; ') FROM opsdesk.operations r
                             WHERE r.id = ANY (ids) AND r.xmax <> '0'::xid), 'another session')
                || ', whose transaction is still open: nothing was ' || verb || '; try again when it ends';
        END;
    END IF;
    IF busy IS NOT NULL THEN
        d := opsdesk.refuse(a, 'busy', busy);
        SELECT d.outcome, d.code, d.message, d.tenant, d.entry INTO outcome, code, message, audit_tenant, audit_entry;
        RETURN;
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
        SELECT d.outcome, d.code, d.tenant, d.entry INTO outcome, code, audit_tenant, audit_entry;
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

-- Name: set_reconciler_pause(boolean, text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.set_reconciler_pause(p_paused boolean, p_reason text, p_display_name text DEFAULT NULL::text) RETURNS opsdesk.decision_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '2s'
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

-- Name: start_batch(text, text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.start_batch(p_filter text, p_display_name text DEFAULT NULL::text) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

-- Name: subject(bigint, boolean); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.subject(p_id bigint, p_lock boolean) RETURNS opsdesk.operations
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    o opsdesk.operations;
BEGIN
    IF NOT p_lock THEN
        SELECT * INTO o FROM opsdesk.operations WHERE id = p_id;
        RETURN o;
    END IF;
    BEGIN
        SELECT * INTO o FROM opsdesk.operations WHERE id = p_id FOR UPDATE;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'operation % is held by %, whose transaction is still open: nothing was changed; try again when it ends',
            p_id, opsdesk.lock_holder((SELECT x.xmax FROM opsdesk.operations x WHERE x.id = p_id), 'opsdesk.operations')
            USING ERRCODE = 'lock_not_available';
    END;
    RETURN o;
END
$$;

-- Name: summarize_refusals(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.summarize_refusals() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    r     record;
    a     opsdesk.audit;
    codes jsonb;
BEGIN
    FOR r IN
        SELECT w.role, w.counted, w.by_code, w.last_counted_at,
            coalesce(s.counted, 0) AS summarized, coalesce(s.by_code, '{}') AS summarized_codes, s.until
        FROM opsdesk.refusal_windows w LEFT JOIN opsdesk.refusal_summaries s ON s.role = w.role
        WHERE w.counted > coalesce(s.counted, 0) AND (s.at IS NULL OR s.at <= clock_timestamp() - interval '1 minute')
        ORDER BY w.role
        LIMIT 100
    LOOP
        SELECT jsonb_object_agg(e.key, e.value::bigint - coalesce((r.summarized_codes->>e.key)::bigint, 0)) INTO codes
        FROM jsonb_each_text(r.by_code) e
        WHERE e.value::bigint > coalesce((r.summarized_codes->>e.key)::bigint, 0);
        a := NULL;
        a.tenant := '';
        a.action := 'refusals:summary';
        a.outcome := CASE WHEN codes ?| ARRAY['not_permitted', 'not_pending', 'lease_live', 'contradicts_lookup']
                          THEN 'denied' ELSE 'failed' END;
        a.details := jsonb_strip_nulls(jsonb_build_object('refusals', r.counted - r.summarized, 'by_code', codes,
            'after', r.until, 'until', r.last_counted_at, 'total', r.counted, 'written_by', session_user,
            'why', 'refusals beyond 30 a minute are counted, not recorded one by one'));
        PERFORM opsdesk.audit_write(a, r.role);
        INSERT INTO opsdesk.refusal_summaries AS s (role, counted, by_code, until, at)
        VALUES (r.role, r.counted, r.by_code, r.last_counted_at, clock_timestamp())
        ON CONFLICT (role) DO UPDATE SET counted = excluded.counted, by_code = excluded.by_code,
            until = excluded.until, at = excluded.at;
    END LOOP;
END
$$;

-- Name: tombstone_policy_problem(jsonb); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.tombstone_policy_problem(p jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
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

-- Name: tool_name_problem(text); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.tool_name_problem(p text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
SELECT CASE
    WHEN p IS NULL OR p = '' THEN 'a tool name must not be empty'
    WHEN octet_length(p) > 128 THEN 'a tool name of ' || octet_length(p) || ' bytes: the limit is 128'
    WHEN p ~ '[\u0001-\u001f\u007f-\u009f]' THEN 'the tool name ' || to_jsonb(left(p, 40))::text || ' contains a control character'
END
$$;

-- Name: unfinished_purge_runs(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.unfinished_purge_runs() RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
SELECT CASE WHEN opsdesk.sees_every_tenant()
    THEN (SELECT count(*) FROM opsdesk.purge_runs WHERE finished_at IS NULL) END
$$;

-- Name: uuid_text(uuid); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.uuid_text(u uuid) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ BEGIN RETURN u::text; END $$;

-- Name: view_state(opsdesk.operations); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.view_state(o opsdesk.operations) RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
SELECT CASE WHEN o.state = 'pending' AND o.lease_expires_at <= now() THEN 'stuck'
            WHEN o.state = 'completed' AND o.outcome = 'rejected' THEN 'rejected'
            ELSE o.state END
$$;

-- Name: visible_tenants(); Type: FUNCTION; Schema: opsdesk; Owner: -

CREATE FUNCTION opsdesk.visible_tenants() RETURNS text[]
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT coalesce(array_agg(tenant), '{}') FROM opsdesk.access WHERE role = session_user $$;

-- Name: access; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.access (
    role text NOT NULL,
    tenant text NOT NULL,
    granted_at timestamp with time zone DEFAULT now() NOT NULL,
    granted_by text NOT NULL,
    CONSTRAINT access_tenant CHECK ((tenant <> ''::text))
);

-- Name: audit_queue; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.audit_queue (
    tenant text NOT NULL,
    entry bigint NOT NULL,
    event_id uuid NOT NULL,
    at timestamp with time zone NOT NULL,
    role text NOT NULL,
    display_name text,
    action text NOT NULL,
    outcome text NOT NULL,
    tool text,
    key text,
    operation_id bigint,
    state_before text,
    state_after text,
    version_before bigint,
    version_after bigint,
    reason text,
    evidence_digest text,
    evidence_summary text,
    forced boolean NOT NULL,
    override boolean NOT NULL,
    details jsonb,
    CONSTRAINT audit_queue_evidence_length CHECK ((octet_length(evidence_summary) <= 2000)),
    CONSTRAINT audit_queue_outcome CHECK ((outcome = ANY (ARRAY['succeeded'::text, 'denied'::text, 'failed'::text]))),
    CONSTRAINT audit_queue_reason_length CHECK ((octet_length(reason) <= 2000))
);

ALTER TABLE ONLY opsdesk.audit_queue FORCE ROW LEVEL SECURITY;

-- Name: audit_entries; Type: SEQUENCE; Schema: opsdesk; Owner: -

CREATE SEQUENCE opsdesk.audit_entries
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- Name: audit_entries; Type: SEQUENCE OWNED BY; Schema: opsdesk; Owner: -

ALTER SEQUENCE opsdesk.audit_entries OWNED BY opsdesk.audit_queue.entry;

-- Name: audit_heads; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.audit_heads (
    tenant text NOT NULL,
    seq bigint NOT NULL,
    hash bytea
);

ALTER TABLE ONLY opsdesk.audit_heads FORCE ROW LEVEL SECURITY;

-- Name: auto_reconcile; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.auto_reconcile (
    tool text NOT NULL,
    verdicts text[] NOT NULL,
    reason text NOT NULL,
    set_by text NOT NULL,
    set_at timestamp with time zone NOT NULL,
    CONSTRAINT auto_reconcile_tool CHECK ((((octet_length(tool) >= 1) AND (octet_length(tool) <= 128)) AND (tool !~ '[[:cntrl:]]'::text))),
    CONSTRAINT auto_reconcile_verdicts CHECK ((((cardinality(verdicts) >= 1) AND (cardinality(verdicts) <= 2)) AND (verdicts <@ ARRAY['found'::text, 'not_found'::text]) AND (array_position(verdicts, NULL::text) IS NULL)))
);

-- Name: batches; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.batches (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    role text DEFAULT SESSION_USER NOT NULL,
    display_name text,
    filter text,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT batches_display_name CHECK ((octet_length(display_name) <= 200)),
    CONSTRAINT batches_filter CHECK ((((octet_length(filter) >= 1) AND (octet_length(filter) <= 1000)) AND (filter !~ '[[:cntrl:]]'::text)))
);

ALTER TABLE ONLY opsdesk.batches FORCE ROW LEVEL SECURITY;

-- Name: conflicts; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.conflicts (
    tenant text NOT NULL,
    id bigint NOT NULL,
    tool text NOT NULL,
    key text NOT NULL,
    operation_id bigint NOT NULL,
    tool_version text NOT NULL,
    fingerprint bytea NOT NULL,
    original_fingerprint bytea NOT NULL,
    owner text NOT NULL,
    attempted_at timestamp with time zone DEFAULT now() NOT NULL,
    reviewed_at timestamp with time zone,
    reviewed_by text,
    intent json DEFAULT 'null'::json,
    CONSTRAINT conflicts_fingerprint_length CHECK ((octet_length(fingerprint) = 32)),
    CONSTRAINT conflicts_original_fingerprint_length CHECK ((octet_length(original_fingerprint) = 32)),
    CONSTRAINT conflicts_reviewed CHECK (((reviewed_at IS NULL) = (reviewed_by IS NULL)))
);

ALTER TABLE ONLY opsdesk.conflicts FORCE ROW LEVEL SECURITY;

-- Name: conflicts_id_seq; Type: SEQUENCE; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.conflicts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME opsdesk.conflicts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: operations_id_seq; Type: SEQUENCE; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.operations ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME opsdesk.operations_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: purge_batches; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.purge_batches (
    run bigint NOT NULL,
    id bigint NOT NULL,
    purged integer NOT NULL,
    per_tenant jsonb NOT NULL,
    first_id bigint NOT NULL,
    last_id bigint NOT NULL,
    done_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY opsdesk.purge_batches FORCE ROW LEVEL SECURITY;

-- Name: purge_batches_id_seq; Type: SEQUENCE; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.purge_batches ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME opsdesk.purge_batches_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: purge_runs_id_seq; Type: SEQUENCE; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.purge_runs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME opsdesk.purge_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: reconciler_pause; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.reconciler_pause (
    one boolean DEFAULT true NOT NULL,
    paused boolean NOT NULL,
    reason text,
    set_by text NOT NULL,
    set_at timestamp with time zone NOT NULL,
    CONSTRAINT reconciler_pause_one CHECK (one)
);

-- Name: record_conflicts; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.record_conflicts (
    tenant text NOT NULL,
    tool text NOT NULL,
    key text NOT NULL,
    unreviewed boolean NOT NULL,
    tracked boolean NOT NULL,
    state text NOT NULL,
    held boolean NOT NULL,
    expires_at timestamp with time zone
);

ALTER TABLE ONLY opsdesk.record_conflicts FORCE ROW LEVEL SECURITY;

-- Name: refusal_summaries; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.refusal_summaries (
    role text NOT NULL,
    counted bigint NOT NULL,
    by_code jsonb NOT NULL,
    until timestamp with time zone,
    at timestamp with time zone NOT NULL
);

-- Name: refusal_windows; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.refusal_windows (
    role text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    recorded integer DEFAULT 0 NOT NULL,
    counted bigint DEFAULT 0 NOT NULL,
    by_code jsonb DEFAULT '{}'::jsonb NOT NULL,
    last_counted_at timestamp with time zone
);

-- Name: reveal_fetch_attempts; Type: SEQUENCE; Schema: opsdesk; Owner: -

CREATE SEQUENCE opsdesk.reveal_fetch_attempts
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- Name: reveal_fetches; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.reveal_fetches (
    tenant text NOT NULL,
    seq bigint,
    role text NOT NULL,
    fetched_at timestamp with time zone NOT NULL,
    entry bigint,
    CONSTRAINT reveal_fetches_names CHECK (((seq IS NOT NULL) OR (entry IS NOT NULL)))
);

-- Name: schema_migrations; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.schema_migrations (
    id integer NOT NULL,
    version_id bigint NOT NULL,
    is_applied boolean NOT NULL,
    tstamp timestamp without time zone DEFAULT now() NOT NULL
);

-- Name: schema_migrations_id_seq; Type: SEQUENCE; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.schema_migrations ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME opsdesk.schema_migrations_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: secrets; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.secrets (
    name text NOT NULL,
    value bytea NOT NULL
);

-- Name: tombstones; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.tombstones (
    tenant text NOT NULL,
    tool text NOT NULL,
    key text NOT NULL,
    operation_id bigint NOT NULL,
    fingerprint bytea NOT NULL,
    purged_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT tombstones_fingerprint_length CHECK ((octet_length(fingerprint) = 32))
);

ALTER TABLE ONLY opsdesk.tombstones FORCE ROW LEVEL SECURITY;

-- Name: tool_policies; Type: TABLE; Schema: opsdesk; Owner: -

CREATE TABLE opsdesk.tool_policies (
    tool text NOT NULL,
    effect text NOT NULL,
    lease_us bigint NOT NULL,
    retention_us bigint NOT NULL,
    retry_window_us bigint NOT NULL,
    after_expiry text NOT NULL,
    recorded_by text NOT NULL,
    recorded_at timestamp with time zone NOT NULL,
    previous jsonb,
    changed_at timestamp with time zone,
    CONSTRAINT tool_policies_after_expiry CHECK ((after_expiry = ANY (ARRAY['reexecute'::text, 'reject'::text]))),
    CONSTRAINT tool_policies_effect CHECK ((effect = ANY (ARRAY['local'::text, 'external_idempotent'::text, 'external_unknown'::text]))),
    CONSTRAINT tool_policies_lease CHECK (((lease_us >= 100000) AND (lease_us <= '86400000000'::bigint))),
    CONSTRAINT tool_policies_retention CHECK (((retention_us >= 1) AND (retention_us <= '3155760000000000'::bigint))),
    CONSTRAINT tool_policies_retry_window CHECK (((retry_window_us >= 1) AND (retry_window_us <= '3155760000000000'::bigint))),
    CONSTRAINT tool_policies_tool CHECK ((((octet_length(tool) >= 1) AND (octet_length(tool) <= 128)) AND (tool !~ '[[:cntrl:]]'::text)))
);

-- Name: audit_queue entry; Type: DEFAULT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.audit_queue ALTER COLUMN entry SET DEFAULT nextval('opsdesk.audit_entries'::regclass);

-- Name: access access_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.access
    ADD CONSTRAINT access_pkey PRIMARY KEY (role, tenant);

-- Name: audit_heads audit_heads_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.audit_heads
    ADD CONSTRAINT audit_heads_pkey PRIMARY KEY (tenant);

-- Name: audit audit_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.audit
    ADD CONSTRAINT audit_pkey PRIMARY KEY (tenant, seq);

-- Name: audit_queue audit_queue_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.audit_queue
    ADD CONSTRAINT audit_queue_pkey PRIMARY KEY (tenant, entry);

-- Name: auto_reconcile auto_reconcile_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.auto_reconcile
    ADD CONSTRAINT auto_reconcile_pkey PRIMARY KEY (tool);

-- Name: batches batches_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.batches
    ADD CONSTRAINT batches_pkey PRIMARY KEY (id);

-- Name: conflicts conflicts_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.conflicts
    ADD CONSTRAINT conflicts_pkey PRIMARY KEY (tenant, id);

-- Name: operations operations_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.operations
    ADD CONSTRAINT operations_pkey PRIMARY KEY (tenant, tool, key);

-- Name: purge_batches purge_batches_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.purge_batches
    ADD CONSTRAINT purge_batches_pkey PRIMARY KEY (run, id);

-- Name: purge_runs purge_runs_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.purge_runs
    ADD CONSTRAINT purge_runs_pkey PRIMARY KEY (id);

-- Name: reconciler_pause reconciler_pause_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.reconciler_pause
    ADD CONSTRAINT reconciler_pause_pkey PRIMARY KEY (one);

-- Name: record_conflicts record_conflicts_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.record_conflicts
    ADD CONSTRAINT record_conflicts_pkey PRIMARY KEY (tenant, tool, key);

-- Name: refusal_summaries refusal_summaries_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.refusal_summaries
    ADD CONSTRAINT refusal_summaries_pkey PRIMARY KEY (role);

-- Name: refusal_windows refusal_windows_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.refusal_windows
    ADD CONSTRAINT refusal_windows_pkey PRIMARY KEY (role);

-- Name: reveal_fetches reveal_fetches_entry; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.reveal_fetches
    ADD CONSTRAINT reveal_fetches_entry UNIQUE (tenant, entry);

-- Name: reveal_fetches reveal_fetches_seq; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.reveal_fetches
    ADD CONSTRAINT reveal_fetches_seq UNIQUE (tenant, seq);

-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (id);

-- Name: secrets secrets_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.secrets
    ADD CONSTRAINT secrets_pkey PRIMARY KEY (name);

-- Name: tombstones tombstones_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.tombstones
    ADD CONSTRAINT tombstones_pkey PRIMARY KEY (tenant, tool, key);

-- Name: tool_policies tool_policies_pkey; Type: CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.tool_policies
    ADD CONSTRAINT tool_policies_pkey PRIMARY KEY (tool);

-- Name: audit_batch_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_batch_idx ON opsdesk.audit USING btree (opsdesk.batch_of(details), tenant) INCLUDE (at) WHERE (opsdesk.batch_of(details) IS NOT NULL);

-- Name: audit_browse_action_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_browse_action_idx ON opsdesk.audit USING btree (action, at, tenant, seq);

-- Name: audit_browse_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_browse_idx ON opsdesk.audit USING btree (at, tenant, seq);

-- Name: audit_browse_key_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_browse_key_idx ON opsdesk.audit USING btree (key text_pattern_ops) INCLUDE (tenant) WHERE (key IS NOT NULL);

-- Name: audit_browse_operation_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_browse_operation_idx ON opsdesk.audit USING btree (operation_id) INCLUDE (tenant) WHERE (operation_id IS NOT NULL);

-- Name: audit_browse_outcome_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_browse_outcome_idx ON opsdesk.audit USING btree (outcome, at, tenant, seq);

-- Name: audit_browse_role_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_browse_role_idx ON opsdesk.audit USING btree (role, at, tenant, seq);

-- Name: audit_browse_tenant_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_browse_tenant_idx ON opsdesk.audit USING btree (tenant, at, seq);

-- Name: audit_browse_tool_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_browse_tool_idx ON opsdesk.audit USING btree (tool, at, tenant, seq) WHERE (tool IS NOT NULL);

-- Name: audit_entry_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE UNIQUE INDEX audit_entry_idx ON opsdesk.audit USING btree (tenant, entry);

-- Name: audit_operation_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX audit_operation_idx ON opsdesk.audit USING btree (tenant, operation_id, seq) WHERE (operation_id IS NOT NULL);

-- Name: batches_started_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX batches_started_idx ON opsdesk.batches USING btree (started_at, id);

-- Name: conflicts_id_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX conflicts_id_idx ON opsdesk.conflicts USING btree (id) INCLUDE (tenant);

-- Name: conflicts_identity_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX conflicts_identity_idx ON opsdesk.conflicts USING btree (tenant, tool, key);

-- Name: conflicts_unreviewed_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX conflicts_unreviewed_idx ON opsdesk.conflicts USING btree (tenant, tool, key) WHERE (reviewed_at IS NULL);

-- Name: operations_conflicted_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_conflicted_idx ON opsdesk.operations USING btree (id) INCLUDE (tenant) WHERE (conflict_count > 0);

-- Name: operations_held_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_held_idx ON opsdesk.operations USING btree (tool) INCLUDE (tenant) WHERE held;

-- Name: operations_id_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_id_idx ON opsdesk.operations USING btree (id);

-- Name: operations_pending_lease_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_pending_lease_idx ON opsdesk.operations USING btree (lease_expires_at) INCLUDE (tenant, tool) WHERE (state = 'pending'::text);

-- Name: operations_pending_tenant_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_pending_tenant_idx ON opsdesk.operations USING btree (tenant, tool, lease_expires_at) WHERE (state = 'pending'::text);

-- Name: operations_rejected_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_rejected_idx ON opsdesk.operations USING btree (id) INCLUDE (tenant) WHERE ((state = 'completed'::text) AND (outcome = 'rejected'::text));

-- Name: operations_rejected_tool_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_rejected_tool_idx ON opsdesk.operations USING btree (tool, tenant) WHERE ((state = 'completed'::text) AND (outcome = 'rejected'::text));

-- Name: operations_released_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_released_idx ON opsdesk.operations USING btree (id) INCLUDE (tenant) WHERE (state = 'released'::text);

-- Name: operations_released_tool_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_released_tool_idx ON opsdesk.operations USING btree (tool, tenant) WHERE (state = 'released'::text);

-- Name: operations_retention_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_retention_idx ON opsdesk.operations USING btree (expires_at) INCLUDE (tenant) WHERE (state = 'completed'::text);

-- Name: operations_tool_expiry_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX operations_tool_expiry_idx ON opsdesk.operations USING btree (tenant, tool, expires_at) INCLUDE (held) WHERE (state = 'completed'::text);

-- Name: purge_runs_unfinished_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX purge_runs_unfinished_idx ON opsdesk.purge_runs USING btree (id) WHERE (finished_at IS NULL);

-- Name: record_conflicts_review_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX record_conflicts_review_idx ON opsdesk.record_conflicts USING btree (tool, expires_at) INCLUDE (tenant) WHERE (unreviewed AND tracked AND (state = 'completed'::text) AND (NOT held));

-- Name: record_conflicts_untracked_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX record_conflicts_untracked_idx ON opsdesk.record_conflicts USING btree (tool) INCLUDE (tenant) WHERE (unreviewed AND (NOT tracked));

-- Name: tombstones_expiry_idx; Type: INDEX; Schema: opsdesk; Owner: -

CREATE INDEX tombstones_expiry_idx ON opsdesk.tombstones USING brin (expires_at);

-- Name: operations_pending_lease_stats; Type: STATISTICS; Schema: opsdesk; Owner: -

CREATE STATISTICS opsdesk.operations_pending_lease_stats ON (CASE WHEN state = 'pending'::text THEN lease_expires_at ELSE NULL::timestamp with time zone END) FROM opsdesk.operations;

-- Name: audit audit_no_change; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER audit_no_change BEFORE DELETE OR UPDATE ON opsdesk.audit FOR EACH ROW EXECUTE FUNCTION opsdesk.audit_append_only();

ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_change;

-- Name: audit audit_no_truncate; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON opsdesk.audit FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.audit_append_only();

ALTER TABLE opsdesk.audit ENABLE ALWAYS TRIGGER audit_no_truncate;

-- Name: audit_queue audit_queue_no_change; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER audit_queue_no_change BEFORE UPDATE ON opsdesk.audit_queue FOR EACH ROW EXECUTE FUNCTION opsdesk.audit_append_only();

ALTER TABLE opsdesk.audit_queue ENABLE ALWAYS TRIGGER audit_queue_no_change;

-- Name: audit_queue audit_queue_no_truncate; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER audit_queue_no_truncate BEFORE TRUNCATE ON opsdesk.audit_queue FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.audit_append_only();

ALTER TABLE opsdesk.audit_queue ENABLE ALWAYS TRIGGER audit_queue_no_truncate;

-- Name: conflicts conflicts_operation_fkey; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER conflicts_operation_fkey AFTER INSERT OR UPDATE OF tenant, tool, key ON opsdesk.conflicts FOR EACH ROW EXECUTE FUNCTION opsdesk.conflict_needs_record();

-- Name: operations conflicts_operation_fkey_delete; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER conflicts_operation_fkey_delete AFTER DELETE ON opsdesk.operations REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.records_keep_conflicts();

-- Name: operations conflicts_operation_fkey_truncate; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER conflicts_operation_fkey_truncate BEFORE TRUNCATE ON opsdesk.operations FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.records_keep_conflicts();

-- Name: operations conflicts_operation_fkey_update; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER conflicts_operation_fkey_update BEFORE UPDATE OF tenant, tool, key ON opsdesk.operations FOR EACH ROW WHEN (((old.tenant IS DISTINCT FROM new.tenant) OR (old.tool IS DISTINCT FROM new.tool) OR (old.key IS DISTINCT FROM new.key))) EXECUTE FUNCTION opsdesk.records_keep_conflicts();

-- Name: operations operations_state_machine_insert; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER operations_state_machine_insert BEFORE INSERT ON opsdesk.operations FOR EACH ROW EXECUTE FUNCTION opsdesk.operations_state_machine();

ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_insert;

-- Name: operations operations_state_machine_kept; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER operations_state_machine_kept BEFORE UPDATE OF effect, owner, attempt, leased_at, lease_expires_at, conflict_count, last_conflict_at ON opsdesk.operations FOR EACH ROW WHEN (((old.state = 'pending'::text) AND (new.state = 'completed'::text))) EXECUTE FUNCTION opsdesk.operations_state_machine();

ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_kept;

-- Name: operations operations_state_machine_update; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER operations_state_machine_update BEFORE UPDATE ON opsdesk.operations FOR EACH ROW WHEN ((NOT COALESCE(((old.state = 'pending'::text) AND (new.state = 'completed'::text) AND (old.owner_role = SESSION_USER) AND (new.version = (old.version + 1)) AND ((new.updated_at >= (clock_timestamp() - '00:00:10'::interval)) AND (new.updated_at <= clock_timestamp())) AND ((new.completed_at >= (clock_timestamp() - '00:00:10'::interval)) AND (new.completed_at <= clock_timestamp())) AND ((new.expires_at >= new.completed_at) AND (new.expires_at <= (new.completed_at + '876600:00:00'::interval))) AND (new.outcome = ANY (ARRAY['succeeded'::text, 'rejected'::text])) AND (new.attempt >= 1) AND (new.version >= 1) AND (new.conflict_count >= 0) AND (new.effect = ANY (ARRAY['local'::text, 'external_idempotent'::text, 'external_unknown'::text])) AND ((octet_length(new.key) >= 1) AND (octet_length(new.key) <= 255)) AND (octet_length(new.fingerprint) = 32)), false))) EXECUTE FUNCTION opsdesk.operations_state_machine();

ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_update;

-- Name: conflicts record_conflicts_of_conflicts; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER record_conflicts_of_conflicts AFTER INSERT OR DELETE OR UPDATE OF reviewed_at, tenant, tool, key ON opsdesk.conflicts FOR EACH ROW EXECUTE FUNCTION opsdesk.record_conflicts_track();

ALTER TABLE opsdesk.conflicts ENABLE ALWAYS TRIGGER record_conflicts_of_conflicts;

-- Name: conflicts record_conflicts_of_conflicts_truncate; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER record_conflicts_of_conflicts_truncate AFTER TRUNCATE ON opsdesk.conflicts FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.record_conflicts_track();

ALTER TABLE opsdesk.conflicts ENABLE ALWAYS TRIGGER record_conflicts_of_conflicts_truncate;

-- Name: operations record_conflicts_of_operations; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER record_conflicts_of_operations AFTER UPDATE OF state, held, expires_at, conflict_count, tenant, tool, key ON opsdesk.operations FOR EACH ROW WHEN (((old.conflict_count > 0) OR (new.conflict_count > 0))) EXECUTE FUNCTION opsdesk.record_conflicts_track();

ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER record_conflicts_of_operations;

-- Name: operations record_conflicts_of_operations_delete; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER record_conflicts_of_operations_delete AFTER DELETE ON opsdesk.operations FOR EACH ROW WHEN ((old.conflict_count > 0)) EXECUTE FUNCTION opsdesk.record_conflicts_track();

ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER record_conflicts_of_operations_delete;

-- Name: operations record_conflicts_of_operations_truncate; Type: TRIGGER; Schema: opsdesk; Owner: -

CREATE TRIGGER record_conflicts_of_operations_truncate AFTER TRUNCATE ON opsdesk.operations FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.record_conflicts_track();

ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER record_conflicts_of_operations_truncate;

-- Name: purge_batches purge_batches_run_fkey; Type: FK CONSTRAINT; Schema: opsdesk; Owner: -

ALTER TABLE ONLY opsdesk.purge_batches
    ADD CONSTRAINT purge_batches_run_fkey FOREIGN KEY (run) REFERENCES opsdesk.purge_runs(id);

-- Name: audit append; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY append ON opsdesk.audit FOR INSERT TO opsdesk_owner WITH CHECK (true);

-- Name: audit; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.audit ENABLE ROW LEVEL SECURITY;

-- Name: audit_heads; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.audit_heads ENABLE ROW LEVEL SECURITY;

-- Name: audit_queue; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.audit_queue ENABLE ROW LEVEL SECURITY;

-- Name: batches; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.batches ENABLE ROW LEVEL SECURITY;

-- Name: audit_heads chains; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY chains ON opsdesk.audit_heads TO opsdesk_owner USING (true) WITH CHECK (true);

-- Name: conflicts; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.conflicts ENABLE ROW LEVEL SECURITY;

-- Name: batches functions; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY functions ON opsdesk.batches TO opsdesk_owner USING (true) WITH CHECK (true);

-- Name: audit migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.audit TO postgres USING (true) WITH CHECK (true);

-- Name: audit_heads migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.audit_heads TO postgres USING (true) WITH CHECK (true);

-- Name: audit_queue migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.audit_queue TO postgres USING (true) WITH CHECK (true);

-- Name: batches migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.batches TO postgres USING (true) WITH CHECK (true);

-- Name: conflicts migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.conflicts TO postgres USING (true) WITH CHECK (true);

-- Name: operations migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.operations TO postgres USING (true) WITH CHECK (true);

-- Name: purge_batches migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.purge_batches TO postgres USING (true) WITH CHECK (true);

-- Name: purge_runs migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.purge_runs TO postgres USING (true) WITH CHECK (true);

-- Name: record_conflicts migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.record_conflicts TO postgres USING (true) WITH CHECK (true);

-- Name: tombstones migrator; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY migrator ON opsdesk.tombstones TO postgres USING (true) WITH CHECK (true);

-- Name: operations; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.operations ENABLE ROW LEVEL SECURITY;

-- Name: audit own; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY own ON opsdesk.audit FOR SELECT TO opsdesk_owner USING ((role = SESSION_USER));

-- Name: audit people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.audit TO opsdesk_viewer, opsdesk_owner USING ((( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant) OR (tenant = ANY (( SELECT opsdesk.visible_tenants() AS visible_tenants)::text[]))));

-- Name: audit_heads people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.audit_heads TO opsdesk_viewer USING ((( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant) OR (tenant = ANY (( SELECT opsdesk.visible_tenants() AS visible_tenants)::text[]))));

-- Name: audit_queue people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.audit_queue FOR SELECT TO opsdesk_viewer USING ((( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant) OR (tenant = ANY (( SELECT opsdesk.visible_tenants() AS visible_tenants)::text[]))));

-- Name: batches people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.batches FOR SELECT TO opsdesk_viewer USING (((role = SESSION_USER) OR ( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant) OR (EXISTS ( SELECT
   FROM opsdesk.audit a
  WHERE (opsdesk.batch_of(a.details) = opsdesk.uuid_text(batches.id))))));

-- Name: conflicts people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.conflicts TO opsdesk_viewer, opsdesk_owner USING ((( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant) OR (tenant = ANY (( SELECT opsdesk.visible_tenants() AS visible_tenants)::text[]))));

-- Name: operations people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.operations TO opsdesk_viewer, opsdesk_owner USING ((( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant) OR (tenant = ANY (( SELECT opsdesk.visible_tenants() AS visible_tenants)::text[]))));

-- Name: purge_batches people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.purge_batches TO opsdesk_admin, opsdesk_owner USING (( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant)) WITH CHECK (( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant));

-- Name: purge_runs people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.purge_runs TO opsdesk_admin, opsdesk_owner USING (( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant)) WITH CHECK (( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant));

-- Name: record_conflicts people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.record_conflicts TO opsdesk_viewer, opsdesk_owner USING ((( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant) OR (tenant = ANY (( SELECT opsdesk.visible_tenants() AS visible_tenants)::text[]))));

-- Name: tombstones people; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY people ON opsdesk.tombstones TO opsdesk_viewer, opsdesk_owner USING ((( SELECT opsdesk.sees_every_tenant() AS sees_every_tenant) OR (tenant = ANY (( SELECT opsdesk.visible_tenants() AS visible_tenants)::text[]))));

-- Name: tombstones purge; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY purge ON opsdesk.tombstones FOR INSERT TO opsdesk_owner WITH CHECK (true);

-- Name: purge_batches; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.purge_batches ENABLE ROW LEVEL SECURITY;

-- Name: purge_runs; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.purge_runs ENABLE ROW LEVEL SECURITY;

-- Name: tombstones purge_update; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY purge_update ON opsdesk.tombstones FOR UPDATE TO opsdesk_owner USING (true) WITH CHECK (true);

-- Name: record_conflicts; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.record_conflicts ENABLE ROW LEVEL SECURITY;

-- Name: audit_queue sealer; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY sealer ON opsdesk.audit_queue TO opsdesk_owner USING (true) WITH CHECK (true);

-- Name: conflicts service; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY service ON opsdesk.conflicts TO opsdesk_service USING (true) WITH CHECK (true);

-- Name: operations service; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY service ON opsdesk.operations TO opsdesk_service USING (true) WITH CHECK (true);

-- Name: tombstones service; Type: POLICY; Schema: opsdesk; Owner: -

CREATE POLICY service ON opsdesk.tombstones TO opsdesk_service USING (true);

-- Name: tombstones; Type: ROW SECURITY; Schema: opsdesk; Owner: -

ALTER TABLE opsdesk.tombstones ENABLE ROW LEVEL SECURITY;

-- Name: SCHEMA opsdesk; Type: ACL; Schema: -; Owner: -

GRANT USAGE ON SCHEMA opsdesk TO opsdesk_service;
GRANT USAGE ON SCHEMA opsdesk TO opsdesk_viewer;
GRANT ALL ON SCHEMA opsdesk TO opsdesk_owner;

-- Name: TABLE audit; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.audit TO opsdesk_viewer;
GRANT SELECT,INSERT ON TABLE opsdesk.audit TO opsdesk_owner;

-- Name: TABLE operations; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT,DELETE,UPDATE ON TABLE opsdesk.operations TO opsdesk_owner;

-- Name: COLUMN operations.tenant; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(tenant) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(tenant) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.tool; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(tool) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(tool) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.key; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(key) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(key) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.id; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(id) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.tool_version; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(tool_version) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(tool_version) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.fingerprint; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(fingerprint) ON TABLE opsdesk.operations TO opsdesk_service;

-- Name: COLUMN operations.effect; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(effect),UPDATE(effect) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(effect) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.state; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(state),UPDATE(state) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(state) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.outcome; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(outcome),UPDATE(outcome) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(outcome) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.owner; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(owner),UPDATE(owner) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(owner) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.attempt; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(attempt),UPDATE(attempt) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(attempt) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.leased_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(leased_at),UPDATE(leased_at) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(leased_at) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.lease_expires_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(lease_expires_at),UPDATE(lease_expires_at) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(lease_expires_at) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.created_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(created_at) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.updated_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT UPDATE(updated_at) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(updated_at) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.completed_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(completed_at),UPDATE(completed_at) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(completed_at) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.expires_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(expires_at),UPDATE(expires_at) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(expires_at) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.result; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(result),UPDATE(result) ON TABLE opsdesk.operations TO opsdesk_service;

-- Name: COLUMN operations.result_ref; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(result_ref),UPDATE(result_ref) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(result_ref) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.version; Type: ACL; Schema: opsdesk; Owner: -

GRANT UPDATE(version) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(version) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.conflict_count; Type: ACL; Schema: opsdesk; Owner: -

GRANT UPDATE(conflict_count) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(conflict_count) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.last_conflict_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT UPDATE(last_conflict_at) ON TABLE opsdesk.operations TO opsdesk_service;
GRANT SELECT(last_conflict_at) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.intent; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(intent) ON TABLE opsdesk.operations TO opsdesk_service;

-- Name: COLUMN operations.held; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(held) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: COLUMN operations.owner_role; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(owner_role) ON TABLE opsdesk.operations TO opsdesk_viewer;

-- Name: FUNCTION about(a opsdesk.audit, o opsdesk.operations); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.about(a opsdesk.audit, o opsdesk.operations) FROM PUBLIC;

-- Name: FUNCTION ack_conflicts(p_id bigint, p_seen bigint[], p_reason text, p_display_name text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.ack_conflicts(p_id bigint, p_seen bigint[], p_reason text, p_display_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.ack_conflicts(p_id bigint, p_seen bigint[], p_reason text, p_display_name text) TO opsdesk_viewer;

-- Name: FUNCTION audit_append(a opsdesk.audit); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.audit_append(a opsdesk.audit) FROM PUBLIC;

-- Name: FUNCTION audit_append_only(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.audit_append_only() FROM PUBLIC;

-- Name: FUNCTION audit_hash(a opsdesk.audit); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.audit_hash(a opsdesk.audit) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.audit_hash(a opsdesk.audit) TO opsdesk_owner;

-- Name: FUNCTION audit_seal(p_tenant text, p_entry bigint, OUT sealed integer, OUT waiting bigint, OUT held_by text, OUT problem text, OUT seq bigint); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.audit_seal(p_tenant text, p_entry bigint, OUT sealed integer, OUT waiting bigint, OUT held_by text, OUT problem text, OUT seq bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.audit_seal(p_tenant text, p_entry bigint, OUT sealed integer, OUT waiting bigint, OUT held_by text, OUT problem text, OUT seq bigint) TO opsdesk_viewer;

-- Name: FUNCTION audit_write(a opsdesk.audit, p_role text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.audit_write(a opsdesk.audit, p_role text) FROM PUBLIC;

-- Name: FUNCTION clean_input(p text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.clean_input(p text) FROM PUBLIC;

-- Name: FUNCTION clean_reason(p text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.clean_reason(p text) FROM PUBLIC;

-- Name: FUNCTION conflict_needs_record(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.conflict_needs_record() FROM PUBLIC;

-- Name: FUNCTION cut(p text, p_bytes integer); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.cut(p text, p_bytes integer) FROM PUBLIC;

-- Name: FUNCTION cut_details(d jsonb, p_bytes integer); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.cut_details(d jsonb, p_bytes integer) FROM PUBLIC;

-- Name: FUNCTION decide(p_id bigint, p_decision text, p_expect_version bigint, p_reason text, p_result_ref text, p_result jsonb, p_evidence_digest text, p_evidence_summary text, p_lookup text, p_force boolean, p_override boolean, p_retention interval, p_snooze_until timestamp with time zone, p_display_name text, p_lookup_ref text, p_batch uuid); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.decide(p_id bigint, p_decision text, p_expect_version bigint, p_reason text, p_result_ref text, p_result jsonb, p_evidence_digest text, p_evidence_summary text, p_lookup text, p_force boolean, p_override boolean, p_retention interval, p_snooze_until timestamp with time zone, p_display_name text, p_lookup_ref text, p_batch uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.decide(p_id bigint, p_decision text, p_expect_version bigint, p_reason text, p_result_ref text, p_result jsonb, p_evidence_digest text, p_evidence_summary text, p_lookup text, p_force boolean, p_override boolean, p_retention interval, p_snooze_until timestamp with time zone, p_display_name text, p_lookup_ref text, p_batch uuid) TO opsdesk_viewer;

-- Name: FUNCTION fingerprint_tags(p_id bigint); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.fingerprint_tags(p_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.fingerprint_tags(p_id bigint) TO opsdesk_viewer;

-- Name: FUNCTION grant_access(p_role text, p_level text, p_tenant text, p_reason text, p_display_name text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.grant_access(p_role text, p_level text, p_tenant text, p_reason text, p_display_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.grant_access(p_role text, p_level text, p_tenant text, p_reason text, p_display_name text) TO opsdesk_viewer;

-- Name: FUNCTION lock_holder(p_xmax xid, p_rel regclass); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.lock_holder(p_xmax xid, p_rel regclass) FROM PUBLIC;

-- Name: FUNCTION may_purge(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.may_purge() FROM PUBLIC;

-- Name: FUNCTION operations_state_machine(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.operations_state_machine() FROM PUBLIC;

-- Name: FUNCTION purge_batch(p_run bigint, p_limit integer); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.purge_batch(p_run bigint, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.purge_batch(p_run bigint, p_limit integer) TO opsdesk_viewer;

-- Name: FUNCTION purge_finish(p_run bigint, p_display_name text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.purge_finish(p_run bigint, p_display_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.purge_finish(p_run bigint, p_display_name text) TO opsdesk_viewer;

-- Name: FUNCTION purge_refused(d opsdesk.decision_result, p_run bigint); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.purge_refused(d opsdesk.decision_result, p_run bigint) FROM PUBLIC;

-- Name: TABLE purge_runs; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.purge_runs TO opsdesk_admin;
GRANT SELECT,INSERT,UPDATE ON TABLE opsdesk.purge_runs TO opsdesk_owner;

-- Name: FUNCTION purge_run_for_delete(a opsdesk.audit, p_run bigint, p_limit integer, p_exclusive boolean, OUT run opsdesk.purge_runs, OUT refusal opsdesk.purge_result); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.purge_run_for_delete(a opsdesk.audit, p_run bigint, p_limit integer, p_exclusive boolean, OUT run opsdesk.purge_runs, OUT refusal opsdesk.purge_result) FROM PUBLIC;

-- Name: FUNCTION purge_start(p_tool text, p_before timestamp with time zone, p_tombstone_for jsonb, p_reason text, p_promised bigint, p_display_name text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.purge_start(p_tool text, p_before timestamp with time zone, p_tombstone_for jsonb, p_reason text, p_promised bigint, p_display_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.purge_start(p_tool text, p_before timestamp with time zone, p_tombstone_for jsonb, p_reason text, p_promised bigint, p_display_name text) TO opsdesk_viewer;

-- Name: FUNCTION purge_tombstones(p_run bigint, p_limit integer); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.purge_tombstones(p_run bigint, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.purge_tombstones(p_run bigint, p_limit integer) TO opsdesk_viewer;

-- Name: FUNCTION quoted(p text, p_chars integer); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.quoted(p text, p_chars integer) FROM PUBLIC;

-- Name: FUNCTION record_conflicts_refresh(p_tenant text, p_tool text, p_key text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.record_conflicts_refresh(p_tenant text, p_tool text, p_key text) FROM PUBLIC;

-- Name: FUNCTION record_conflicts_track(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.record_conflicts_track() FROM PUBLIC;

-- Name: FUNCTION record_tool_policy(p_tool text, p_effect text, p_lease_us bigint, p_retention_us bigint, p_retry_window_us bigint, p_after_expiry text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.record_tool_policy(p_tool text, p_effect text, p_lease_us bigint, p_retention_us bigint, p_retry_window_us bigint, p_after_expiry text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.record_tool_policy(p_tool text, p_effect text, p_lease_us bigint, p_retention_us bigint, p_retry_window_us bigint, p_after_expiry text) TO opsdesk_service;

-- Name: FUNCTION records_keep_conflicts(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.records_keep_conflicts() FROM PUBLIC;

-- Name: FUNCTION refuse(a opsdesk.audit, p_code text, p_message text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.refuse(a opsdesk.audit, p_code text, p_message text) FROM PUBLIC;

-- Name: FUNCTION reveal_claim(p_tenant text, p_entry bigint, p_actions text[]); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.reveal_claim(p_tenant text, p_entry bigint, p_actions text[]) FROM PUBLIC;

-- Name: FUNCTION reveal_conflict_fetch(p_tenant text, p_entry bigint); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.reveal_conflict_fetch(p_tenant text, p_entry bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.reveal_conflict_fetch(p_tenant text, p_entry bigint) TO opsdesk_viewer;

-- Name: FUNCTION reveal_conflict_request(p_conflict_id bigint, p_reason text, p_display_name text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.reveal_conflict_request(p_conflict_id bigint, p_reason text, p_display_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.reveal_conflict_request(p_conflict_id bigint, p_reason text, p_display_name text) TO opsdesk_viewer;

-- Name: FUNCTION reveal_fetch(p_tenant text, p_entry bigint); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.reveal_fetch(p_tenant text, p_entry bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.reveal_fetch(p_tenant text, p_entry bigint) TO opsdesk_viewer;

-- Name: FUNCTION reveal_fetch_counts(OUT attempted bigint, OUT recorded bigint); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.reveal_fetch_counts(OUT attempted bigint, OUT recorded bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.reveal_fetch_counts(OUT attempted bigint, OUT recorded bigint) TO opsdesk_viewer;

-- Name: FUNCTION reveal_mark(a opsdesk.audit, p_visible boolean); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.reveal_mark(a opsdesk.audit, p_visible boolean) FROM PUBLIC;

-- Name: FUNCTION reveal_name(p_tenant text, p_entry bigint); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.reveal_name(p_tenant text, p_entry bigint) FROM PUBLIC;

-- Name: FUNCTION reveal_request(p_id bigint, p_field text, p_reason text, p_display_name text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.reveal_request(p_id bigint, p_field text, p_reason text, p_display_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.reveal_request(p_id bigint, p_field text, p_reason text, p_display_name text) TO opsdesk_viewer;

-- Name: FUNCTION sees_every_tenant(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.sees_every_tenant() FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.sees_every_tenant() TO opsdesk_viewer;

-- Name: FUNCTION set_auto_reconcile(p_tool text, p_verdicts text[], p_reason text, p_display_name text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.set_auto_reconcile(p_tool text, p_verdicts text[], p_reason text, p_display_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.set_auto_reconcile(p_tool text, p_verdicts text[], p_reason text, p_display_name text) TO opsdesk_viewer;

-- Name: FUNCTION set_hold(p_ids bigint[], p_hold boolean, p_reason text, p_display_name text, OUT outcome text, OUT code text, OUT message text, OUT audit_tenant text, OUT audit_entry bigint, OUT changed integer, OUT unchanged integer, OUT missing bigint[]); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.set_hold(p_ids bigint[], p_hold boolean, p_reason text, p_display_name text, OUT outcome text, OUT code text, OUT message text, OUT audit_tenant text, OUT audit_entry bigint, OUT changed integer, OUT unchanged integer, OUT missing bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.set_hold(p_ids bigint[], p_hold boolean, p_reason text, p_display_name text, OUT outcome text, OUT code text, OUT message text, OUT audit_tenant text, OUT audit_entry bigint, OUT changed integer, OUT unchanged integer, OUT missing bigint[]) TO opsdesk_viewer;

-- Name: FUNCTION set_reconciler_pause(p_paused boolean, p_reason text, p_display_name text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.set_reconciler_pause(p_paused boolean, p_reason text, p_display_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.set_reconciler_pause(p_paused boolean, p_reason text, p_display_name text) TO opsdesk_viewer;

-- Name: FUNCTION start_batch(p_filter text, p_display_name text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.start_batch(p_filter text, p_display_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.start_batch(p_filter text, p_display_name text) TO opsdesk_viewer;

-- Name: FUNCTION subject(p_id bigint, p_lock boolean); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.subject(p_id bigint, p_lock boolean) FROM PUBLIC;

-- Name: FUNCTION summarize_refusals(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.summarize_refusals() FROM PUBLIC;

-- Name: FUNCTION tombstone_policy_problem(p jsonb); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.tombstone_policy_problem(p jsonb) FROM PUBLIC;

-- Name: FUNCTION tool_name_problem(p text); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.tool_name_problem(p text) FROM PUBLIC;

-- Name: FUNCTION unfinished_purge_runs(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.unfinished_purge_runs() FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.unfinished_purge_runs() TO opsdesk_viewer;

-- Name: FUNCTION view_state(o opsdesk.operations); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.view_state(o opsdesk.operations) FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.view_state(o opsdesk.operations) TO opsdesk_owner;

-- Name: FUNCTION visible_tenants(); Type: ACL; Schema: opsdesk; Owner: -

REVOKE ALL ON FUNCTION opsdesk.visible_tenants() FROM PUBLIC;
GRANT ALL ON FUNCTION opsdesk.visible_tenants() TO opsdesk_viewer;

-- Name: TABLE access; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE opsdesk.access TO opsdesk_owner;

-- Name: TABLE audit_queue; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.audit_queue TO opsdesk_viewer;
GRANT SELECT,INSERT,DELETE ON TABLE opsdesk.audit_queue TO opsdesk_owner;

-- Name: SEQUENCE audit_entries; Type: ACL; Schema: opsdesk; Owner: -

GRANT USAGE ON SEQUENCE opsdesk.audit_entries TO opsdesk_owner;

-- Name: TABLE audit_heads; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.audit_heads TO opsdesk_viewer;
GRANT SELECT,INSERT,UPDATE ON TABLE opsdesk.audit_heads TO opsdesk_owner;

-- Name: TABLE auto_reconcile; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.auto_reconcile TO opsdesk_viewer;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE opsdesk.auto_reconcile TO opsdesk_owner;

-- Name: TABLE batches; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.batches TO opsdesk_viewer;
GRANT SELECT,INSERT ON TABLE opsdesk.batches TO opsdesk_owner;

-- Name: TABLE conflicts; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT,DELETE ON TABLE opsdesk.conflicts TO opsdesk_owner;

-- Name: COLUMN conflicts.tenant; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(tenant) ON TABLE opsdesk.conflicts TO opsdesk_service;
GRANT SELECT(tenant) ON TABLE opsdesk.conflicts TO opsdesk_viewer;

-- Name: COLUMN conflicts.id; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(id) ON TABLE opsdesk.conflicts TO opsdesk_service;
GRANT SELECT(id) ON TABLE opsdesk.conflicts TO opsdesk_viewer;

-- Name: COLUMN conflicts.tool; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(tool) ON TABLE opsdesk.conflicts TO opsdesk_service;
GRANT SELECT(tool) ON TABLE opsdesk.conflicts TO opsdesk_viewer;

-- Name: COLUMN conflicts.key; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(key) ON TABLE opsdesk.conflicts TO opsdesk_service;
GRANT SELECT(key) ON TABLE opsdesk.conflicts TO opsdesk_viewer;

-- Name: COLUMN conflicts.operation_id; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(operation_id) ON TABLE opsdesk.conflicts TO opsdesk_service;
GRANT SELECT(operation_id) ON TABLE opsdesk.conflicts TO opsdesk_viewer;

-- Name: COLUMN conflicts.tool_version; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(tool_version) ON TABLE opsdesk.conflicts TO opsdesk_service;
GRANT SELECT(tool_version) ON TABLE opsdesk.conflicts TO opsdesk_viewer;

-- Name: COLUMN conflicts.fingerprint; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(fingerprint) ON TABLE opsdesk.conflicts TO opsdesk_service;

-- Name: COLUMN conflicts.original_fingerprint; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(original_fingerprint) ON TABLE opsdesk.conflicts TO opsdesk_service;

-- Name: COLUMN conflicts.owner; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(owner) ON TABLE opsdesk.conflicts TO opsdesk_service;
GRANT SELECT(owner) ON TABLE opsdesk.conflicts TO opsdesk_viewer;

-- Name: COLUMN conflicts.attempted_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(attempted_at) ON TABLE opsdesk.conflicts TO opsdesk_viewer;

-- Name: COLUMN conflicts.reviewed_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(reviewed_at) ON TABLE opsdesk.conflicts TO opsdesk_viewer;
GRANT UPDATE(reviewed_at) ON TABLE opsdesk.conflicts TO opsdesk_owner;

-- Name: COLUMN conflicts.reviewed_by; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(reviewed_by) ON TABLE opsdesk.conflicts TO opsdesk_viewer;
GRANT UPDATE(reviewed_by) ON TABLE opsdesk.conflicts TO opsdesk_owner;

-- Name: COLUMN conflicts.intent; Type: ACL; Schema: opsdesk; Owner: -

GRANT INSERT(intent) ON TABLE opsdesk.conflicts TO opsdesk_service;

-- Name: TABLE purge_batches; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.purge_batches TO opsdesk_admin;
GRANT SELECT,INSERT,DELETE ON TABLE opsdesk.purge_batches TO opsdesk_owner;

-- Name: TABLE reconciler_pause; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.reconciler_pause TO opsdesk_viewer;
GRANT SELECT,UPDATE ON TABLE opsdesk.reconciler_pause TO opsdesk_owner;

-- Name: TABLE record_conflicts; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.record_conflicts TO opsdesk_viewer;

-- Name: TABLE refusal_summaries; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT,INSERT,UPDATE ON TABLE opsdesk.refusal_summaries TO opsdesk_owner;

-- Name: TABLE refusal_windows; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT,INSERT,UPDATE ON TABLE opsdesk.refusal_windows TO opsdesk_owner;

-- Name: SEQUENCE reveal_fetch_attempts; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT,USAGE ON SEQUENCE opsdesk.reveal_fetch_attempts TO opsdesk_owner;

-- Name: TABLE reveal_fetches; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT,INSERT ON TABLE opsdesk.reveal_fetches TO opsdesk_owner;

-- Name: TABLE schema_migrations; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.schema_migrations TO opsdesk_viewer;

-- Name: TABLE secrets; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.secrets TO opsdesk_owner;

-- Name: TABLE tombstones; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.tombstones TO opsdesk_service;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE opsdesk.tombstones TO opsdesk_owner;

-- Name: COLUMN tombstones.tenant; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(tenant) ON TABLE opsdesk.tombstones TO opsdesk_viewer;

-- Name: COLUMN tombstones.tool; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(tool) ON TABLE opsdesk.tombstones TO opsdesk_viewer;

-- Name: COLUMN tombstones.key; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(key) ON TABLE opsdesk.tombstones TO opsdesk_viewer;

-- Name: COLUMN tombstones.operation_id; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(operation_id) ON TABLE opsdesk.tombstones TO opsdesk_viewer;

-- Name: COLUMN tombstones.purged_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(purged_at) ON TABLE opsdesk.tombstones TO opsdesk_viewer;

-- Name: COLUMN tombstones.expires_at; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT(expires_at) ON TABLE opsdesk.tombstones TO opsdesk_viewer;

-- Name: TABLE tool_policies; Type: ACL; Schema: opsdesk; Owner: -

GRANT SELECT ON TABLE opsdesk.tool_policies TO opsdesk_viewer;
GRANT SELECT,INSERT,UPDATE ON TABLE opsdesk.tool_policies TO opsdesk_owner;
