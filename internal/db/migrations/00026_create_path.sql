-- A create near a hand-written one (issue 20 §1).
--
-- Measured with pgbench at 00025, a completed insert cost the store about
-- twice what the table's own work does, and most of it was preparing
-- expressions: the server prepares every CHECK constraint and every
-- trigger's WHEN condition again for each statement (the expressions are
-- read from the catalog, planned and compiled for that statement's
-- executor), prepared statement or not. The ten CHECKs cost about a
-- quarter of DoTx's create. A PL/pgSQL function plans its expressions once
-- per session and keeps the plans.
--
-- So the table's rules move into the state machine's function, which
-- already runs for every writer (ENABLE ALWAYS, superusers and the
-- table's owner included), and its insert trigger loses its WHEN
-- condition: the function is called for every insert and takes the
-- library's two inserts (the reservation, DoTx's completed insert) on a
-- fast path first, whose condition now includes the table's rules.
-- Nothing the CHECKs refused is allowed: each rule is the CHECK's own
-- expression, refuses only what the CHECK refused (a false condition, not
-- a NULL one), and is refused as the CHECK was: check_violation (23514),
-- the constraint's name in the error's constraint field, PostgreSQL's own
-- message. A write that breaks a step of the state machine and a rule
-- gets the state machine's error, as before (a BEFORE trigger ran before
-- the CHECKs). A superuser is held to the rules, as the CHECKs held one,
-- and to nothing more, as before.
--
-- Updates: the completion's fast path stays a WHEN condition, now with the
-- rules a completion could break; every other update already called the
-- function, which checks the rules once the step is allowed.
-- operations_state_machine_kept still sends a completion that names
-- another column to the function in full.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsdesk.operations_state_machine() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd

DROP TRIGGER operations_state_machine_insert ON opsdesk.operations;
CREATE TRIGGER operations_state_machine_insert BEFORE INSERT ON opsdesk.operations
    FOR EACH ROW EXECUTE FUNCTION opsdesk.operations_state_machine();
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_insert;

-- The completion (completeSQL) by the login holding the lease, as in
-- migration 00024, and the table's rules a completion could break (the
-- service cannot update key or fingerprint; the table's owner can).
DROP TRIGGER operations_state_machine_update ON opsdesk.operations;
CREATE TRIGGER operations_state_machine_update BEFORE UPDATE ON opsdesk.operations
    FOR EACH ROW WHEN (NOT coalesce(OLD.state = 'pending' AND NEW.state = 'completed'
        AND OLD.owner_role = session_user AND NEW.version = OLD.version + 1
        AND NEW.updated_at BETWEEN clock_timestamp() - interval '10 seconds' AND clock_timestamp()
        AND NEW.completed_at BETWEEN clock_timestamp() - interval '10 seconds' AND clock_timestamp()
        AND NEW.expires_at BETWEEN NEW.completed_at AND NEW.completed_at + interval '876600 hours'
        AND NEW.outcome IN ('succeeded', 'rejected') AND NEW.attempt >= 1 AND NEW.version >= 1
        AND NEW.conflict_count >= 0 AND NEW.effect IN ('local', 'external_idempotent', 'external_unknown')
        AND octet_length(NEW.key) BETWEEN 1 AND 255 AND octet_length(NEW.fingerprint) = 32, false))
    EXECUTE FUNCTION opsdesk.operations_state_machine();
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_update;

ALTER TABLE opsdesk.operations
    DROP CONSTRAINT operations_key_length,
    DROP CONSTRAINT operations_fingerprint_length,
    DROP CONSTRAINT operations_effect,
    DROP CONSTRAINT operations_state,
    DROP CONSTRAINT operations_outcome,
    DROP CONSTRAINT operations_pending_lease,
    DROP CONSTRAINT operations_attempt,
    DROP CONSTRAINT operations_version,
    DROP CONSTRAINT operations_conflict_count,
    DROP CONSTRAINT operations_completed_expiry;
