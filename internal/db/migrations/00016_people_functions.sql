-- The people's functions of migration 00005, hardened (issue 10).
--
-- 1. A lookup's reference. decide takes p_lookup_ref, the reference a
--    lookup that said found gave: confirming completed with another
--    reference contradicts the lookup and needs override, as the other
--    contradictions do. The signature changes, so decide is dropped and
--    created again (owner, PUBLIC revoked, granted to viewers as before).
--
-- 2. Numbers, intervals and times are checked, and a bad one is an audited
--    'invalid' refusal like any other bad input: ids and versions from 1
--    up; a retention between 1 minute and 100 years (below a minute a
--    record an operator decided could be purged before the retry that the
--    decision was for comes back to replay it; such values are unit
--    mistakes, such as seconds passed as microseconds; beyond 100 years the
--    expiry is a unit mistake too, and far enough from the timestamp range
--    that now() + retention never fails); a snooze time in the future and
--    at most a year ahead; up to 10,000 seen conflicts, no NULL among them;
--    a reveal names its audit record by a chain and a sequence from 1 up.
--
-- 3. People's text (reasons, evidence notes, display names) is trimmed of
--    Unicode white space by clean_reason, so a tab, a newline or U+3000 is
--    not a reason. Text over 64 KiB is refused as too long before it is
--    trimmed (clean_input): trimming 32 MiB takes seconds.
--
-- 4. grant_access looks the role up by its exact name in pg_roles and works
--    with its oid: p_role::regrole parsed the name as an identifier, so
--    'Grp' was checked as the role grp while "Grp" was granted.
--
-- 5. reveal_fetch checks again, at fetch time, that the role is an operator
--    and sees the record, and a request gives one fetch: the fetch writes
--    the request into reveal_fetches, in a transaction that has written
--    nothing before (checked on entry, as before, so the request's audit
--    record was committed by an earlier transaction), and a request found
--    there is refused. A request lasts a minute (it was five).
--
-- 6. Every text that reaches an audit record is cut after it is composed:
--    messages quote a cut prefix of the input (quoted), refuse cuts the
--    caller's details to 2,500 bytes before it adds the refusal and its
--    message (at most 1,000 bytes), and audit_append cuts every field
--    again, whoever calls it (details to 8,000 bytes).
--
-- 7. No person stalls another's decision, and refusals do not grow the
--    trail without bound.
--
--    Gates. A chain's sequence is taken under its head row's lock, held
--    until commit, and the caller decides when that is: one viewer's
--    SELECT decide(…), decide(…), pg_sleep(25) held a tenant's chain for
--    25 s. Now every append first locks the chain's gate, a row of
--    opsdesk.gates that only the functions may lock (chain_lock), and a
--    decision locks its record's gate before the record (subject), in
--    rounds of 200 ms (lock_timeout). Between rounds a waiter reads who
--    holds the gate from the badge the holder shows (an advisory lock:
--    pg_locks names its pid and virtual transaction to every role, unlike
--    pg_stat_activity's transaction times: no pg_read_all_stats needed).
--    Once one holder has held it for 2 s while the waiter waited, without
--    being seen waiting in a gate or for a lock that only others than
--    people hold (a decision waiting for the library is spared), and is a
--    person's session (not a superuser, not opsdesk_service, not
--    opsdesk_owner or its members: the migrating role), the waiter ends
--    that session (pg_terminate_backend). Its
--    transaction rolls back: its decision goes with its audit record, so
--    "no audit, no change" still holds. The waiter's audit record names a
--    session it ended for a chain (details.ended_sessions); the server log
--    has every one. Another holder (a superuser's session) makes the
--    waiter fail, naming it. grant_access takes the '' chain's gate before
--    it writes anything, so a second grant waits there rather than on the
--    first one's rows. The library takes no gate: a decision waits for
--    the library's row locks as before, and the library's own waits on a
--    person's row lock are not bounded here.
--    Ending sessions needs pg_signal_backend, which this migration no
--    longer grants (see below): the waiter fails after 2 s instead, with
--    lock_not_available naming the holding role and pid.
--
--    Refusals without rights. A refusal of a role with no rights to the
--    record (not_found: the record is not visible; not_permitted: the role
--    may not do this) goes to the '' chain with the record's tenant in
--    details.tenant, never to the tenant's chain: a viewer never holds a
--    tenant's chain, and holding '' is ended as above.
--
--    Refusal rate. The first 30 refusals of a role in a minute (a window
--    opened by the first) are audited one by one; the rest are counted
--    (refusal_windows, by code) and get no record of their own: the caller
--    is told so. The counts reach the '' chain as one 'refusals:summary'
--    record per role, with the role as its role and the number of refusals
--    and their codes in details, appended before the next record on the ''
--    chain, at most once a minute per role (refusal_summaries remembers
--    what was summarized). A role's flood costs the trail at most 31
--    records a minute; each refusal is in a record of its own or in a
--    summary's count.
--
--    Function-level lock_timeout bounds each round of waiting; no
--    statement_timeout: a legitimate decision may wait through a queue.
--    Those rounds are shorter than deadlock_timeout, so PostgreSQL never
--    sees a cycle of gates: a waiter whose holder waits for it gives up
--    with deadlock_detected. Longer cycles (three sessions each holding
--    what the next waits for, in statements calling the functions
--    crosswise) are not looked for.
--
-- Found by review:
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
-- (set_hold, migration 00017, does the same.) What is left: a call
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

-- clean_reason trims Unicode white space (and the invisible BOM and
-- zero-width space) from both ends of a person's text; NULL when nothing is
-- left. People's reasons, notes and names go through it.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.clean_reason(p text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT nullif(regexp_replace(p, '^[[:space:]\u0085\u00a0\u1680\u180e\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]+|[[:space:]\u0085\u00a0\u1680\u180e\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]+$', '', 'g'), '') $$;
-- +goose StatementEnd

-- clean_input is clean_reason for what fits the functions' limits; text
-- over 64 KiB, which every limit refuses, is returned as it is.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.clean_input(p text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN octet_length(p) > 65536 THEN p ELSE opsdesk.clean_reason(p) END $$;
-- +goose StatementEnd

-- cut returns p if it has at most p_bytes bytes, else a prefix of it that,
-- marked as cut, has fewer (a character has at most 4 bytes).
-- +goose StatementBegin
CREATE FUNCTION opsdesk.cut(p text, p_bytes integer) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN octet_length(p) <= p_bytes THEN p ELSE left(p, (p_bytes - 12) / 4) || '… (cut)' END $$;
-- +goose StatementEnd

-- cut_details returns d if its text has at most p_bytes bytes, else
-- {"cut": a prefix of its text} that has fewer: a character of the prefix
-- takes at most 4 bytes in the new string (a quote or a backslash 2).
-- +goose StatementBegin
CREATE FUNCTION opsdesk.cut_details(d jsonb, p_bytes integer) RETURNS jsonb
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN octet_length(d::text) <= p_bytes THEN d
                  ELSE jsonb_build_object('cut', left(d::text, (p_bytes - 20) / 4)) END $$;
-- +goose StatementEnd

-- quoted quotes p for a message, at most p_chars characters of it ('…'
-- marks a cut), or says NULL.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.quoted(p text, p_chars integer) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN p IS NULL THEN 'NULL'
                  WHEN left(p, p_chars) = p THEN quote_literal(p)
                  ELSE quote_literal(left(p, p_chars)) || '…' END $$;
-- +goose StatementEnd

-- This migration granted pg_signal_backend to opsdesk_owner here, for the
-- gates of 00016-00022 to end a session that held what others waited for.
-- 00023 replaced the gates and revoked it; the grant is gone from here too
-- (no store was released between them), because a role membership is the
-- cluster's: installing a fresh database gave every database's
-- opsdesk_owner pg_signal_backend until its 00023 ran, and two databases
-- installed at once raced on it. Until 00023 the gates' waiters fail after
-- 2 s instead of ending the holder, as they did without the grant.

-- is_person tells whether role p_role is a person's: not a superuser,
-- not opsdesk_service's, not opsdesk_owner's (the migrating role's).
-- +goose StatementBegin
CREATE FUNCTION opsdesk.is_person(p_role oid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT NOT r.rolsuper AND NOT pg_has_role(r.oid, 'opsdesk_service', 'MEMBER')
             AND NOT pg_has_role(r.oid, 'opsdesk_owner', 'MEMBER')
      FROM pg_roles r WHERE r.oid = p_role $$;
-- +goose StatementEnd

-- end_stall deals with session p_pid, which has held p_what for p_held
-- while this one waited: a person's session is ended (what it did rolls
-- back) and described for the waiter's audit record. Any other session
-- (superuser, service, opsdesk_owner's members) is not ended: the waiter
-- fails, naming it; so it does for a person's when opsdesk_owner lacks
-- pg_signal_backend. NULL: the session was gone already.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.end_stall(p_pid integer, p_held interval, p_what text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r      record;
    person boolean;
    held   text := to_char(extract(epoch FROM p_held), 'FM9999990.0') || ' s';
BEGIN
    SELECT a.usesysid, ro.rolname INTO r
    FROM pg_stat_activity a JOIN pg_roles ro ON ro.oid = a.usesysid WHERE a.pid = p_pid;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    person := opsdesk.is_person(r.usesysid);
    IF person AND pg_has_role(current_user, 'pg_signal_backend', 'USAGE') THEN
        RAISE WARNING 'opsdesk ends the session of % (pid %): it held % for % while % waited',
            quote_ident(r.rolname), p_pid, p_what, held, quote_ident(session_user);
        PERFORM pg_terminate_backend(p_pid, 5000);
        RETURN jsonb_build_object('role', r.rolname, 'pid', p_pid, 'held', held, 'what', p_what);
    END IF;
    RAISE EXCEPTION '% has been held for % by the session of % (pid %), which is still open', p_what, held, quote_ident(r.rolname), p_pid
        USING ERRCODE = 'lock_not_available',
            DETAIL = CASE WHEN person THEN 'opsdesk cannot end it: opsdesk_owner is not granted pg_signal_backend.'
                          ELSE 'opsdesk ends people''s sessions only, not a superuser''s, a service''s or opsdesk_owner''s.' END,
            HINT = 'Try again when it has finished, or have an administrator end that session.';
END
$$;
-- +goose StatementEnd

-- Gates: a person's function locks the gate of a chain (kind 1, bucket
-- hash of the tenant) or of a record (kind 2, hash of its id) before the
-- rows it guards, so that a person who holds a chain head or a record holds
-- its gate. Buckets are made here, 4,096 of each kind: tenants or records
-- that share one share a gate, which costs a wait, never correctness. Only
-- opsdesk_owner may lock them, so nobody else can hold a gate. (An
-- advisory lock, which any login may take, would let any login stall the
-- functions.)
CREATE TABLE opsdesk.gates (
    kind   smallint NOT NULL,
    bucket integer  NOT NULL,
    CONSTRAINT gates_pkey PRIMARY KEY (kind, bucket)
);
INSERT INTO opsdesk.gates (kind, bucket) SELECT k, b FROM generate_series(1, 2) k, generate_series(0, 4095) b;
-- The '' chain's gate: no tenant's bucket reaches 4096.
INSERT INTO opsdesk.gates (kind, bucket) VALUES (1, 4096);
GRANT SELECT, UPDATE ON opsdesk.gates TO opsdesk_owner;

-- gate locks gate (p_kind, p_bucket), which guards p_what, until the
-- transaction ends (again is at once), in rounds of 200 ms. A row lock
-- does not say who holds it once the holder's savepoint is released, so
-- the holder also shows a badge: a shared advisory lock on (0x6f707364
-- "opsd" + kind, bucket), which pg_locks shows with its pid and virtual
-- transaction to every role. Between rounds a waiter reads the badges; a
-- session that has shown one for 2 s while the waiter waited goes to
-- end_stall, unless it was waiting meanwhile in a gate or for a lock that
-- only others than people hold (a decision waiting for the library's row
-- lock): then the 2 s start again. Anyone may take a badge's advisory
-- lock: a
-- person who shows a badge without the gate is ended as if it held the
-- gate, and blocks nobody; one who holds a badge exclusively (holders show
-- theirs shared) is ended by the next holder at once. It returns the
-- sessions it ended, or NULL.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.gate(p_kind smallint, p_bucket integer, p_what text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '200ms'
AS $$
DECLARE
    badge  integer := 1869640547 + p_kind;
    cur    text[];
    seen   text[];
    calm   timestamptz;
    h      text;
    h_pid    integer;
    blockers integer[];
    spared   boolean;
    gone   jsonb;
    ended  jsonb;
BEGIN
    LOOP
        BEGIN
            PERFORM FROM opsdesk.gates WHERE kind = p_kind AND bucket = p_bucket FOR UPDATE;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
        SELECT array_agg(l.pid || '/' || l.virtualtransaction ORDER BY l.pid) INTO cur FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.classid = badge::oid AND l.objid = p_bucket::oid AND l.objsubid = 2 AND l.granted
          AND l.pid <> pg_backend_pid();
        IF cur IS NULL OR seen IS NULL OR NOT (cur && seen) THEN
            seen := cur;
            calm := clock_timestamp();
            CONTINUE;
        END IF;
        -- Those shown since the first look, all along.
        seen := ARRAY(SELECT unnest(cur) INTERSECT SELECT unnest(seen));
        -- A holder that waits is spared, and the clock starts again, when
        -- it waits in a gate (where it deals with its own holder as this
        -- function does) or for a lock that only others than people hold
        -- (the library's row lock, say): a holder is ended after 2 s of
        -- doing neither. One waiting for a person's lock elsewhere is not
        -- spared: that person may be its accomplice. A holder waiting for
        -- this session is a deadlock, which this session gives up.
        spared := false;
        FOREACH h IN ARRAY seen LOOP
            h_pid := split_part(h, '/', 1)::integer;
            CONTINUE WHEN NOT EXISTS (SELECT FROM pg_locks w WHERE w.pid = h_pid AND NOT w.granted);
            blockers := pg_blocking_pids(h_pid);
            IF pg_backend_pid() = ANY (blockers) THEN
                RAISE EXCEPTION '% is held by the session of pid %, which waits for this one', p_what, h_pid
                    USING ERRCODE = 'deadlock_detected';
            END IF;
            IF EXISTS (SELECT FROM pg_locks t WHERE t.pid = h_pid AND t.locktype = 'tuple'
                       AND t.relation = 'opsdesk.gates'::regclass)
               OR NOT EXISTS (SELECT FROM unnest(blockers) b(pid)
                              JOIN pg_stat_activity a ON a.pid = b.pid WHERE opsdesk.is_person(a.usesysid)) THEN
                spared := true;
            END IF;
        END LOOP;
        IF spared THEN
            calm := clock_timestamp();
        END IF;
        CONTINUE WHEN clock_timestamp() - calm < interval '2 seconds';
        FOREACH h IN ARRAY seen LOOP
            gone := opsdesk.end_stall(split_part(h, '/', 1)::integer, clock_timestamp() - calm, p_what);
            IF gone IS NOT NULL THEN
                ended := coalesce(ended, '[]') || jsonb_build_array(gone);
            END IF;
        END LOOP;
        seen := NULL;
    END LOOP;
    -- Legitimate holders show their badge shared: whoever holds one
    -- exclusively is stalling the gate's holders, and is dealt with at once.
    WHILE NOT pg_try_advisory_xact_lock_shared(badge, p_bucket) LOOP
        FOR h_pid IN
            SELECT l.pid FROM pg_locks l
            WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND l.classid = badge::oid AND l.objid = p_bucket::oid AND l.objsubid = 2 AND l.granted
              AND l.mode = 'ExclusiveLock'
        LOOP
            gone := opsdesk.end_stall(h_pid, interval '0', 'the badge of ' || p_what);
            IF gone IS NOT NULL THEN
                ended := coalesce(ended, '[]') || jsonb_build_array(gone);
            END IF;
        END LOOP;
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN ended;
END
$$;
-- +goose StatementEnd

-- chain_lock takes chain p_tenant's gate.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.chain_lock(p_tenant text) RETURNS jsonb
LANGUAGE sql SET search_path = pg_catalog, pg_temp
AS $$ SELECT opsdesk.gate(1::smallint, CASE WHEN p_tenant = '' THEN 4096 ELSE hashtext(p_tenant) & 4095 END,
    'the audit chain ' || CASE WHEN p_tenant = '' THEN '''''' ELSE opsdesk.quoted(p_tenant, 40) END) $$;
-- +goose StatementEnd

-- subject as in migration 00005, but a decision takes the record's gate
-- before its row lock: a person's session that has held the record for
-- 2 s while another decision waited is ended. The library's transactions
-- take no gate, and the row lock waits for them as before.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.subject(p_id bigint, p_lock boolean) RETURNS opsdesk.operations
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o opsdesk.operations;
BEGIN
    IF p_lock AND pg_has_role(session_user, 'opsdesk_operator', 'MEMBER') THEN
        PERFORM opsdesk.gate(2::smallint, hashint8(p_id) & 4095, 'operation ' || p_id);
        SELECT * INTO o FROM opsdesk.operations WHERE id = p_id FOR UPDATE;
    ELSE
        SELECT * INTO o FROM opsdesk.operations WHERE id = p_id;
    END IF;
    RETURN o;
END
$$;
-- +goose StatementEnd

-- What a role's refusals cost the trail: refusals recorded one by one in
-- the window that started at window_start, and those only counted, ever
-- (by code). Only the role's own refusals write its row.
CREATE TABLE opsdesk.refusal_windows (
    role            text        NOT NULL,
    window_start    timestamptz NOT NULL,
    recorded        integer     NOT NULL DEFAULT 0,
    counted         bigint      NOT NULL DEFAULT 0,
    by_code         jsonb       NOT NULL DEFAULT '{}',
    last_counted_at timestamptz,
    CONSTRAINT refusal_windows_pkey PRIMARY KEY (role)
);

-- What of refusal_windows the '' chain has summarized. Written by holders
-- of the '' chain only.
CREATE TABLE opsdesk.refusal_summaries (
    role    text        NOT NULL,
    counted bigint      NOT NULL,
    by_code jsonb       NOT NULL,
    until   timestamptz,
    at      timestamptz NOT NULL,
    CONSTRAINT refusal_summaries_pkey PRIMARY KEY (role)
);

-- Reveal requests fetched: one fetch each.
CREATE TABLE opsdesk.reveal_fetches (
    tenant     text        NOT NULL,
    seq        bigint      NOT NULL,
    role       text        NOT NULL,
    fetched_at timestamptz NOT NULL,
    CONSTRAINT reveal_fetches_pkey PRIMARY KEY (tenant, seq)
);

GRANT SELECT, INSERT, UPDATE ON opsdesk.refusal_windows, opsdesk.refusal_summaries TO opsdesk_owner;
GRANT SELECT, INSERT ON opsdesk.reveal_fetches TO opsdesk_owner;

-- audit_write appends a to its chain as role p_role; the caller holds the
-- chain's gate. Every field is cut to its limit here, whatever composed it.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.audit_write(a opsdesk.audit, p_role text) RETURNS opsdesk.audit
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    head opsdesk.audit_heads;
BEGIN
    INSERT INTO opsdesk.audit_heads (tenant, seq) VALUES (a.tenant, 0) ON CONFLICT DO NOTHING;
    SELECT * INTO head FROM opsdesk.audit_heads WHERE tenant = a.tenant FOR UPDATE;
    a.action := opsdesk.cut(a.action, 100);
    a.display_name := opsdesk.cut(a.display_name, 200);
    a.evidence_digest := opsdesk.cut(a.evidence_digest, 200);
    a.reason := opsdesk.cut(a.reason, 2000);
    a.evidence_summary := opsdesk.cut(a.evidence_summary, 2000);
    a.tool := opsdesk.cut(a.tool, 1000);
    a.key := opsdesk.cut(a.key, 1000);
    a.details := opsdesk.cut_details(a.details, 8000);
    a.seq := head.seq + 1;
    a.prev_hash := head.hash;
    a.event_id := gen_random_uuid();
    -- The clock under the head's lock: times rise with the sequence,
    -- however long the caller's transaction was open.
    a.at := clock_timestamp();
    a.role := p_role;
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

-- summarize_refusals appends, for each role with refusals counted and not
-- yet summarized (and no summary in the last minute), one record of them;
-- the caller holds the '' chain's gate. It reads the counts as committed,
-- without locking them: a role's refusals never wait for it.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.summarize_refusals() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd

-- audit_append as in migration 00005, through the chain's gate (the
-- header); on the '' chain the refusal summaries due go first. Its
-- signature and its callers are unchanged.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.audit_append(a opsdesk.audit) RETURNS opsdesk.audit
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ended jsonb;
BEGIN
    ended := opsdesk.chain_lock(a.tenant);
    IF ended IS NOT NULL THEN
        a.details := coalesce(a.details, '{}') || jsonb_build_object('ended_sessions', ended);
    END IF;
    IF a.tenant = '' THEN
        PERFORM opsdesk.summarize_refusals();
    END IF;
    RETURN opsdesk.audit_write(a, session_user);
END
$$;
-- +goose StatementEnd

-- refuse as in migration 00005, with the chain and rate rules of the
-- header, and its texts cut after they are composed. A refusal counted
-- without a record of its own answers seq NULL.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.refuse(a opsdesk.audit, p_code text, p_message text) RETURNS opsdesk.decision_result
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    w     opsdesk.refusal_windows;
    t_now timestamptz := clock_timestamp();
BEGIN
    IF p_code = 'not_found' THEN
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

-- decide as in migration 00005, with p_lookup_ref (a completed decision
-- whose reference differs from the lookup's contradicts it), the checks of
-- numbers and times, and people's text trimmed (the header).
DROP FUNCTION opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text);
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

-- ack_conflicts as in migration 00005, with the seen ids checked, the text
-- trimmed, and at most 100 ids named in its record (and their count).
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

-- reveal_request as in migration 00005, with the id checked and the text
-- trimmed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.reveal_request(p_id bigint, p_field text, p_reason text, p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o opsdesk.operations;
    a opsdesk.audit;
    v jsonb;
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

-- reveal_fetch returns the value of reveal request p_tenant#p_seq, once:
-- the request must be the role's, committed by an earlier transaction, at
-- most a minute old and not fetched yet, and the role must still be an
-- operator who sees the record. The fetch's transaction writes only the
-- request into reveal_fetches; a fetch whose transaction does not commit
-- leaves the request unfetched.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.reveal_fetch(p_tenant text, p_seq bigint) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a     opsdesk.audit;
    v       jsonb;
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

-- grant_access as in migration 00005, with the role looked up by its exact
-- name (its oid from pg_roles), the text trimmed and cut, the tenant
-- checked as the library checks tenants, and the '' chain's gate taken
-- before it writes.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.grant_access(p_role text, p_level text, p_tenant text, p_reason text,
    p_display_name text DEFAULT NULL)
RETURNS opsdesk.decision_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a      opsdesk.audit;
    lvl    text;
    target record;
    ended  jsonb;
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
    -- The '' chain's gate before the first write: a second grant waits
    -- here, where a holder that keeps it is ended, not on this one's rows.
    ended := opsdesk.chain_lock('');
    IF ended IS NOT NULL THEN
        a.details := a.details || jsonb_build_object('ended_sessions', ended);
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
    RETURN ('succeeded', NULL, NULL, a.tenant, a.seq, NULL, NULL)::opsdesk.decision_result;
END
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.clean_reason(text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.clean_input(text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.cut(text, integer) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.cut_details(jsonb, integer) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.quoted(text, integer) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.is_person(oid) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.end_stall(integer, interval, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.gate(smallint, integer, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.chain_lock(text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.audit_write(opsdesk.audit, text) OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.summarize_refusals() OWNER TO opsdesk_owner;
ALTER FUNCTION opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text, text) OWNER TO opsdesk_owner;

REVOKE ALL ON FUNCTION opsdesk.clean_reason(text), opsdesk.clean_input(text), opsdesk.cut(text, integer),
    opsdesk.cut_details(jsonb, integer), opsdesk.quoted(text, integer),
    opsdesk.is_person(oid), opsdesk.end_stall(integer, interval, text), opsdesk.gate(smallint, integer, text), opsdesk.chain_lock(text),
    opsdesk.audit_write(opsdesk.audit, text), opsdesk.summarize_refusals(),
    opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.clean_reason(text), opsdesk.clean_input(text), opsdesk.cut(text, integer),
    opsdesk.cut_details(jsonb, integer), opsdesk.quoted(text, integer),
    opsdesk.is_person(oid), opsdesk.end_stall(integer, interval, text), opsdesk.gate(smallint, integer, text), opsdesk.chain_lock(text),
    opsdesk.audit_write(opsdesk.audit, text), opsdesk.summarize_refusals()
    TO opsdesk_owner;
-- Viewers may call it: it refuses them and audits the attempt.
GRANT EXECUTE ON FUNCTION
    opsdesk.decide(bigint, text, bigint, text, text, jsonb, text, text, text, boolean, boolean, interval, timestamptz, text, text)
    TO opsdesk_viewer;
