-- The audit trail is sealed after commit (issue 18 §1).
--
-- Until now a person's function appended to its tenant's hash chain under
-- the chain head's row lock, held until its transaction ended, so one
-- person's open transaction held the whole tenant. The gates of
-- migrations 00016-00018 (advisory-lock badges, a polling loop,
-- pg_terminate_backend after 2 s) were built to end such holders; any
-- login could beat them (a waiting exclusive advisory lock made every new
-- shared one fail, so a decision spun until its statement timeout), cycles
-- of one admin's sessions never resolved, and they ended sessions.
--
-- They go. The trail works as Trillian's and Certificate Transparency's
-- logs do, with a sequencer:
--
-- * A change's audit entry is queued in the change's own transaction
--   (opsdesk.audit_queue, via audit_write), so nothing changes without
--   its entry: no audit, no change. Queueing takes no lock anyone else
--   needs. The entry's identity from then on is (tenant, entry); the
--   functions answer it where they answered the sequence number
--   (decision_result and purge_result: seq renamed entry; set_hold's
--   audit_seq is audit_entry).
-- * opsdesk.audit_seal() integrates what has committed: for each chain it
--   takes the head without waiting (SKIP LOCKED: a chain another session
--   is sealing is left to it, and named; the chain of the entry its caller
--   asks about is waited for, 250 ms at most), gives the chain's queued entries,
--   in entry order, their sequence numbers, previous hashes and hashes,
--   moves them into opsdesk.audit and advances the head. opsdesk's own
--   commands call it right after they commit, and the console's poll and
--   the exporter call it too, so a person sees the sequence number at
--   once. Refusal summaries are written by the sealer of the '' chain.
--   opsdesk.audit keeps only sealed rows: every reader of the trail reads
--   what it read before; entries still queued are counted, with the oldest
--   one's age, by audit verify, doctor and the exporter.
-- * A wait on a record's row lock is bounded by lock_timeout (2 s) in
--   every person's function that writes; a decision or an acknowledgement
--   that times out is refused as 'busy', audited, and names the session
--   that holds the record (its role and pid). Nobody's session is ended.
--
-- What a held chain still costs: a session that calls audit_seal and keeps
-- its transaction open holds the heads it sealed until it ends; other
-- sealers skip those chains (a caller asking for its own entry's place
-- waits 250 ms first) and their entries wait, queued and counted, until it
-- ends. No decision, grant, purge or hold waits for it.
--
-- A reveal fetched in a transaction that rolls back leaves no fetch
-- record (PostgreSQL has no autonomous transaction); every fetch is
-- counted in a sequence, which no rollback takes back, and
-- reveal_fetch_counts() compares the two for admins of every tenant.

-- +goose Up

-- The sequence numbers entries from the moment they are queued; sealed
-- rows keep their entry (NULL on rows sealed before this migration).
CREATE SEQUENCE opsdesk.audit_entries AS bigint;
ALTER TABLE opsdesk.audit ADD COLUMN entry bigint;
CREATE UNIQUE INDEX audit_entry_idx ON opsdesk.audit (tenant, entry);

CREATE TABLE opsdesk.audit_queue (
    tenant           text        NOT NULL,
    entry            bigint      NOT NULL DEFAULT nextval('opsdesk.audit_entries'),
    event_id         uuid        NOT NULL,
    at               timestamptz NOT NULL,
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
    details          jsonb,
    CONSTRAINT audit_queue_pkey PRIMARY KEY (tenant, entry),
    CONSTRAINT audit_queue_outcome CHECK (outcome IN ('succeeded', 'denied', 'failed')),
    CONSTRAINT audit_queue_reason_length CHECK (octet_length(reason) <= 2000),
    CONSTRAINT audit_queue_evidence_length CHECK (octet_length(evidence_summary) <= 2000)
);
ALTER SEQUENCE opsdesk.audit_entries OWNED BY opsdesk.audit_queue.entry;

-- The queue is append-only but for the sealer's DELETE of what it sealed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.audit_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'opsdesk.% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_queue_no_change BEFORE UPDATE ON opsdesk.audit_queue
    FOR EACH ROW EXECUTE FUNCTION opsdesk.audit_append_only();
CREATE TRIGGER audit_queue_no_truncate BEFORE TRUNCATE ON opsdesk.audit_queue
    FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.audit_append_only();
ALTER TABLE opsdesk.audit_queue ENABLE ALWAYS TRIGGER audit_queue_no_change;
ALTER TABLE opsdesk.audit_queue ENABLE ALWAYS TRIGGER audit_queue_no_truncate;

ALTER TABLE opsdesk.audit_queue ENABLE ROW LEVEL SECURITY;
ALTER TABLE opsdesk.audit_queue FORCE ROW LEVEL SECURITY;
-- People see their tenants' queued entries (verify counts them); the
-- functions, as opsdesk_owner, queue entries and seal every chain.
CREATE POLICY people ON opsdesk.audit_queue FOR SELECT TO opsdesk_viewer
    USING ((SELECT opsdesk.sees_every_tenant()) OR tenant = ANY ((SELECT opsdesk.visible_tenants())::text[]));
CREATE POLICY sealer ON opsdesk.audit_queue TO opsdesk_owner USING (true) WITH CHECK (true);
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('CREATE POLICY migrator ON opsdesk.audit_queue TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;
-- +goose StatementEnd
GRANT SELECT ON opsdesk.audit_queue TO opsdesk_viewer;
GRANT SELECT, INSERT, DELETE ON opsdesk.audit_queue TO opsdesk_owner;
GRANT USAGE ON SEQUENCE opsdesk.audit_entries TO opsdesk_owner;
-- A function answers a refusal's sequence number to its own role even on
-- a chain the role does not see (the '' chain of a one-tenant operator).
CREATE POLICY own ON opsdesk.audit FOR SELECT TO opsdesk_owner USING (role = session_user);

ALTER TYPE opsdesk.decision_result RENAME ATTRIBUTE seq TO entry;
ALTER TYPE opsdesk.purge_result RENAME ATTRIBUTE seq TO entry;
ALTER TABLE opsdesk.purge_runs ADD COLUMN start_entry bigint, ADD COLUMN audit_entry bigint;

-- A fetch names its request by entry; fetches before this migration by seq.
ALTER TABLE opsdesk.reveal_fetches DROP CONSTRAINT reveal_fetches_pkey;
ALTER TABLE opsdesk.reveal_fetches ALTER COLUMN seq DROP NOT NULL;
ALTER TABLE opsdesk.reveal_fetches ADD COLUMN entry bigint;
ALTER TABLE opsdesk.reveal_fetches ADD CONSTRAINT reveal_fetches_seq UNIQUE (tenant, seq);
ALTER TABLE opsdesk.reveal_fetches ADD CONSTRAINT reveal_fetches_entry UNIQUE (tenant, entry);
ALTER TABLE opsdesk.reveal_fetches ADD CONSTRAINT reveal_fetches_names CHECK (seq IS NOT NULL OR entry IS NOT NULL);

-- The gates go, and with them the right to end sessions.
DROP FUNCTION opsdesk.chain_lock(text);
DROP FUNCTION opsdesk.gate(smallint, integer, text);
DROP FUNCTION opsdesk.end_stall(integer, interval, text);
DROP FUNCTION opsdesk.is_person(oid);
DROP TABLE opsdesk.gates;
-- +goose StatementBegin
DO $$
BEGIN
    IF pg_has_role('opsdesk_owner', 'pg_signal_backend', 'MEMBER') THEN
        REVOKE pg_signal_backend FROM opsdesk_owner;
    END IF;
EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
    RAISE WARNING 'opsdesk_owner keeps pg_signal_backend, which opsdesk no longer uses: % may not revoke it', current_user
        USING HINT = 'As a superuser: REVOKE pg_signal_backend FROM opsdesk_owner';
END
$$;
-- +goose StatementEnd

-- audit_write queues a as role p_role. Every field is cut to its limit
-- here, whatever composed it. It returns a as queued: no seq or hash yet.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.audit_write(a opsdesk.audit, p_role text) RETURNS opsdesk.audit
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd

-- audit_append queues a as the session's role (the refusal summaries are
-- the sealer's now).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.audit_append(a opsdesk.audit) RETURNS opsdesk.audit
LANGUAGE sql SET search_path = pg_catalog, pg_temp
AS $$ SELECT opsdesk.audit_write(a, session_user) $$;
-- +goose StatementEnd

-- lock_holder names the sessions that hold a row of p_rel whose xmax is
-- p_xmax: their role and pid, which pg_locks and pg_stat_activity show
-- every role. A row locked in a subtransaction (a function's exception
-- block) and then updated has a MultiXactId for its xmax, whose members
-- are the lockers; a holder also holds a lock on p_rel, which rules out
-- the members of an unrelated MultiXactId of the same number.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.lock_holder(p_xmax xid, p_rel regclass) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd

-- subject reads record p_id, locked when p_lock. The wait for the row is
-- bounded by the caller's lock_timeout; one that times out names who holds
-- the record.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.subject(p_id bigint, p_lock boolean) RETURNS opsdesk.operations
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd

-- audit_seal seals what has committed in every chain (the header) and
-- answers, for the chains the caller sees: how many entries it sealed, how
-- many are still queued (chains another session is sealing), who holds
-- those, why a chain could not be sealed (problem), and the sequence number of the caller's own entry p_entry of
-- chain p_tenant once sealed (by this call or an earlier one). It runs in
-- a READ COMMITTED transaction that has written nothing: what it seals
-- must have committed, and it holds the heads it sealed only until it
-- returns, when it is the statement of its own transaction.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.audit_seal(p_tenant text DEFAULT NULL, p_entry bigint DEFAULT NULL,
    OUT sealed integer, OUT waiting bigint, OUT held_by text, OUT problem text, OUT seq bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '250ms'
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
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.ack_conflicts(p_id bigint, p_seen bigint[], p_reason text, p_display_name text DEFAULT NULL::text)
 RETURNS opsdesk.decision_result
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET lock_timeout TO '2s'
AS $function$
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
$function$;
-- +goose StatementEnd

-- decide and ack_conflicts as before, answering their entry, with a wait for
-- the record bounded by lock_timeout: one that times out is refused as
-- 'busy' (audited), naming who holds the record.
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.reveal_conflict_request(p_conflict_id bigint, p_reason text, p_display_name text DEFAULT NULL::text)
 RETURNS opsdesk.decision_result
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.reveal_request(p_id bigint, p_field text, p_reason text, p_display_name text DEFAULT NULL::text)
 RETURNS opsdesk.decision_result
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- The other functions that answer an audit record answer its entry.
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.purge_finish(p_run bigint, p_display_name text DEFAULT NULL::text)
 RETURNS opsdesk.purge_result
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.purge_start(p_tool text, p_before timestamp with time zone, p_tombstone_for jsonb, p_reason text, p_promised bigint, p_display_name text DEFAULT NULL::text)
 RETURNS opsdesk.purge_result
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.purge_refused(d opsdesk.decision_result, p_run bigint)
 RETURNS opsdesk.purge_result
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$ SELECT (d.outcome, d.code, d.message, d.tenant, d.entry, p_run, NULL, NULL)::opsdesk.purge_result $function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.purge_run_for_delete(a opsdesk.audit, p_run bigint, p_limit integer, p_exclusive boolean, OUT run opsdesk.purge_runs, OUT refusal opsdesk.purge_result)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

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
    ELSIF p_level IS NOT NULL AND p_level NOT IN ('viewer', 'operator', 'admin') THEN
        RETURN opsdesk.refuse(a, 'invalid', 'unknown level ' || opsdesk.quoted(p_level, 20) || ' (viewer, operator, admin)');
    ELSIF p_level IS NOT NULL AND opsdesk.clean_input(p_tenant) IS NULL THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a tenant is required (''*'' for every tenant)');
    ELSIF p_level IS NOT NULL AND (octet_length(p_tenant) > 128 OR p_tenant ~ '[[:cntrl:]]') THEN
        RETURN opsdesk.refuse(a, 'invalid', 'a tenant is up to 128 bytes, without control characters, not ' || opsdesk.quoted(p_tenant, 40));
    END IF;
    FOREACH lvl IN ARRAY ARRAY['viewer', 'operator', 'admin'] LOOP
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


-- set_hold as in migration 00017 without the gates: the records' row
-- locks are taken in id order (two holds never wait for each other
-- crosswise), and a wait for one is bounded by lock_timeout; a hold that
-- times out is refused as 'busy', audited, naming the holder. Its audit
-- record is named by audit_entry.
DROP FUNCTION opsdesk.set_hold(bigint[], boolean, text, text);
-- +goose StatementBegin
CREATE FUNCTION opsdesk.set_hold(p_ids bigint[], p_hold boolean, p_reason text, p_display_name text DEFAULT NULL,
    OUT outcome text, OUT code text, OUT message text, OUT audit_tenant text, OUT audit_entry bigint,
    OUT changed integer, OUT unchanged integer, OUT missing bigint[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
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
-- +goose StatementEnd

-- Every fetch is counted, rolled back or not (reveal_mark), and the count
-- is compared with the fetches recorded: PostgreSQL has no autonomous
-- transaction, so one audited request can yield a read in a transaction
-- that then rolls back, and again. The count says it happened.
CREATE SEQUENCE opsdesk.reveal_fetch_attempts AS bigint;
GRANT USAGE, SELECT ON SEQUENCE opsdesk.reveal_fetch_attempts TO opsdesk_owner;

-- reveal_fetch_counts answers, to roles that see every tenant, how many
-- fetches ran since migration 00023 and how many are recorded; the
-- difference were fetched in transactions that rolled back.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_fetch_counts(OUT attempted bigint, OUT recorded bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM opsdesk.reveal_fetch_attempts),
    (SELECT count(*) FROM opsdesk.reveal_fetches WHERE entry IS NOT NULL)
WHERE opsdesk.sees_every_tenant()
$$;
-- +goose StatementEnd

-- Reveals name their request by its entry: the request's audit record may
-- not be sealed yet when its value is fetched.
DROP FUNCTION opsdesk.reveal_fetch(text, bigint);
DROP FUNCTION opsdesk.reveal_conflict_fetch(text, bigint);
DROP FUNCTION opsdesk.reveal_claim(text, bigint, text[]);
DROP FUNCTION opsdesk.reveal_name(text, bigint);

-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_name(p_tenant text, p_entry bigint) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN p_tenant = '' THEN '''''' ELSE opsdesk.quoted(p_tenant, 40) END || ' entry ' || p_entry $$;
-- +goose StatementEnd

-- reveal_claim finds the caller's reveal request (p_tenant, p_entry) of
-- the last minute, queued or sealed.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_claim(p_tenant text, p_entry bigint, p_actions text[]) RETURNS opsdesk.audit
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.reveal_mark(a opsdesk.audit, p_visible boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_fetch(p_tenant text, p_entry bigint) RETURNS json
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION opsdesk.reveal_conflict_fetch(p_tenant text, p_entry bigint)
 RETURNS TABLE(original_request json, attempted_request json, original_fingerprinted boolean, attempted_fingerprinted boolean, original_missing text, attempted_missing text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.lock_holder(xid, regclass) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_fetch_counts() OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.reveal_fetch_counts() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.reveal_fetch_counts() TO opsdesk_viewer;
ALTER FUNCTION opsdesk.audit_seal(text, bigint) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.set_hold(bigint[], boolean, text, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_name(text, bigint) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_claim(text, bigint, text[]) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_fetch(text, bigint) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.reveal_conflict_fetch(text, bigint) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.lock_holder(xid, regclass), opsdesk.audit_seal(text, bigint),
    opsdesk.set_hold(bigint[], boolean, text, text), opsdesk.reveal_name(text, bigint),
    opsdesk.reveal_claim(text, bigint, text[]), opsdesk.reveal_fetch(text, bigint),
    opsdesk.reveal_conflict_fetch(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.audit_seal(text, bigint), opsdesk.set_hold(bigint[], boolean, text, text),
    opsdesk.reveal_fetch(text, bigint), opsdesk.reveal_conflict_fetch(text, bigint) TO opsdesk_viewer;
