-- No time a service writes may blind the console (issue 18 §2).
--
-- A service login reserved a record with lease_expires_at = 'infinity':
-- the reservation's fast path checked only that the lease ends no earlier
-- than now(), and so did renewal; a completed insert with expires_at =
-- 'infinity' passed as well. The record was never stuck and never alerted,
-- no person could clear it, and every reader that scanned its times into a
-- Go time.Time failed for the whole tenant. The state machine now bounds
-- every time the service writes, on the fast paths too:
--
--   now        leased_at, completed_at, updated_at and last_conflict_at are
--              within the ten seconds before the database clock at the
--              write;
--   lease      lease_expires_at is no earlier than leased_at (a reservation
--              or a takeover) or than ten seconds ago (a renewal), and at
--              most 24 hours after the database clock;
--   retention  expires_at is no earlier than completed_at and at most
--              876,600 hours (100 years of 365.25 days) after the database
--              clock.
--
-- 'infinity', '-infinity', year 294276 and negative leases all fall
-- outside, and are refused as every other step is: check_violation
-- (23514), constraint operations_state_machine, the rule with the value
-- written, the clock in DETAIL and what to write in HINT. The database
-- does not know the tools' policies (the tool catalog is the console's
-- configuration, and each service passes its own to ops.New), so the
-- bounds are the longest the library accepts: ops.New refuses a
-- Policy.Lease over 24 hours (a lease is renewed every third of it; a
-- process that died holds its record that long) and a Policy.Retention
-- over 876,600 hours. The people's functions keep their own bounds (a
-- retention of 1 minute to 100 years, a snooze of at most a year).
--
-- The clock is clock_timestamp(), the time of the write, not now(), the
-- transaction's start: a service transaction open for an hour (DoTx runs
-- the service's business writes inside its transaction, and a login may
-- keep one open as long as it likes) back-dated completed_at by that hour,
-- and could write an expiry, or a lease, that had passed before it
-- committed. A bound on the transaction's age would refuse a long DoTx
-- that did nothing wrong; a time taken at the write is true whatever the
-- transaction did before. The library (from this schema on) writes
-- clock_timestamp() too. Ten seconds allow for the time between reading
-- the clock for a statement's values and this check: a trigger sees a
-- row once its values are computed and, for an update, once its row lock
-- is granted (an update that waited for a change of its row computes them
-- again). Refused, as stale: an update that waited longer for a lock that
-- changed nothing (the library reports it as not recorded; the record
-- stays pending for a person), and a library of an earlier schema, which
-- writes now(), when its transaction is older than ten seconds. No
-- trigger sees a transaction's commit: one that waits after its write
-- commits what was true at the write. created_at and an insert's
-- updated_at stay now(), the columns' defaults, which the service cannot
-- write.
--
-- Cost. The fast paths stay WHEN conditions that never call the function:
-- the reservation's checks leased_at against two readings of the clock and
-- the lease against leased_at, the completed insert its completion and
-- expiry against leased_at (the library writes one instant for all three),
-- the completion its update and completion against the clock and its
-- expiry against its completion. No query is added.
-- The intervals are literals: a WHEN condition is not planned, so a
-- function naming them would be called for every row.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.operations_state_machine() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
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
            RETURN NEW;
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
    IF rule IS NULL AND NEW.state = 'completed' AND (TG_OP = 'INSERT' OR OLD.state = 'pending') THEN
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
        IF TG_OP = 'INSERT' THEN
            NEW.owner_role := session_user;
        END IF;
        RETURN NEW;
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
END
$$;
-- +goose StatementEnd

-- The reservation (reserveSQL) and DoTx's completed insert
-- (insertCompletedSQL), by a service login: leased within the ten seconds
-- before the clock, for at most 24 hours; the completed insert completed
-- at the same instant, kept at most 876,600 hours. outcome is NULL on a
-- pending record by the table's operations_outcome constraint; owner_role
-- defaults to the login and the columns the service cannot insert keep
-- their defaults. Each bound's arithmetic is on a time already checked, so
-- none overflows.
DROP TRIGGER operations_state_machine_insert ON opsdesk.operations;
CREATE TRIGGER operations_state_machine_insert BEFORE INSERT ON opsdesk.operations
    FOR EACH ROW WHEN (NOT coalesce(NEW.attempt = 1
        AND NEW.leased_at BETWEEN clock_timestamp() - interval '10 seconds' AND clock_timestamp()
        AND NEW.lease_expires_at BETWEEN NEW.leased_at AND NEW.leased_at + interval '24 hours'
        AND current_setting('is_superuser') = 'off'
        AND CASE NEW.state
            WHEN 'pending' THEN NEW.result IS NULL AND NEW.result_ref IS NULL AND NEW.completed_at IS NULL
                AND NEW.expires_at IS NULL
            WHEN 'completed' THEN NEW.effect = 'local' AND NEW.completed_at = NEW.leased_at
                AND NEW.expires_at BETWEEN NEW.completed_at AND NEW.completed_at + interval '876600 hours'
            END, false))
    EXECUTE FUNCTION opsdesk.operations_state_machine();
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_insert;

-- The completion (completeSQL) by the login holding the lease: updated and
-- completed within the ten seconds before the clock, kept at most 876,600
-- hours. operations_state_machine_kept (migration 00015) still checks, in
-- full, a completion that names another column.
DROP TRIGGER operations_state_machine_update ON opsdesk.operations;
CREATE TRIGGER operations_state_machine_update BEFORE UPDATE ON opsdesk.operations
    FOR EACH ROW WHEN (NOT coalesce(OLD.state = 'pending' AND NEW.state = 'completed'
        AND OLD.owner_role = session_user AND NEW.version = OLD.version + 1
        AND NEW.updated_at BETWEEN clock_timestamp() - interval '10 seconds' AND clock_timestamp()
        AND NEW.completed_at BETWEEN clock_timestamp() - interval '10 seconds' AND clock_timestamp()
        AND NEW.expires_at BETWEEN NEW.completed_at AND NEW.completed_at + interval '876600 hours', false))
    EXECUTE FUNCTION opsdesk.operations_state_machine();
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_update;
