-- The operation state machine, enforced by the database for every writer
-- (issue 10). Column privileges kept the service role from rewriting a
-- record's identity, but any login granted opsdesk_service could still
-- rewrite a completed record's result, complete another's stuck record,
-- reset its version or push it back to pending, and rewrite a held record,
-- with plain SQL and no audit record. Triggers now allow the service only
-- the library's own steps:
--
--   reserve    INSERT: pending, attempt 1, version 1, leased from now, no
--              outcome, no conflicts, not held;
--   take over  a released record, or a pending one whose lease expired when
--              the provider deduplicates by key (the effect external_idempotent
--              before and after): the next attempt, version + 1, leased from
--              now, by any service login;
--   complete   a pending record, by the login that holds its lease, owner and
--              attempt unchanged, completed_at now, expires_at not in the past;
--   release    a pending record, by the login that holds its lease;
--   lease      renewed (while live) or shortened (never into the past) on a
--              pending record, by the login that holds its lease, version
--              unchanged;
--   conflict   conflict_count + 1 and last_conflict_at now, in any state.
--
-- Each step changes its own columns and nothing else (a column added
-- later is immutable to the service until this function says otherwise);
-- version goes up by one with every change of state, owner, attempt or
-- result and stays put otherwise. Completed and rejected records are
-- therefore final, and a held record is frozen except for what its lease
-- holder records about the attempt running now (completion, release, its
-- lease) and conflict counts: recording what happened is not rewriting it.
-- A held record is never taken over.
--
-- Who holds a lease: the login (session_user) that reserved or took over
-- the record, kept in owner_role (its default on insert; the trigger on
-- takeover; the service has no privilege on the column). The owner column
-- is the name a process chose and cannot be checked; a login can. A login
-- is therefore the unit of trust: processes sharing one can act on each
-- other's leases, so each service should log in as its own role. Records
-- reserved before this migration, or inserted by a superuser, name no
-- login; any service login may complete, release or renew them.
--
-- The people's functions (SECURITY DEFINER, owned by opsdesk_owner) do
-- their own checks and write their own audit records; the trigger only
-- keeps them from changing id, identity, fingerprint or created_at, from
-- lowering the version, and from changing state, owner, attempt or result
-- without raising it. Superusers pass unchecked: they can disable any
-- trigger anyway, and tests set up fixtures as one. So can the tables'
-- owner (the migrating role), which may ALTER TABLE … DISABLE TRIGGER.
--
-- A refusal raises check_violation (23514) naming the constraint
-- operations_state_machine and the rule the write broke.
--
-- Cost. The library runs one transaction per call with one row per
-- statement, so what a trigger costs per statement and per transaction
-- counts, not per row: a PL/pgSQL trigger pays its call and pinned
-- search_path on every statement and builds every expression it evaluates
-- again in every transaction, and a WHEN condition is read back from its
-- stored text and compiled on every statement, in proportion to its size.
-- The library's two hot writes, the reservation and the completion, are
-- therefore recognised by small WHEN conditions and never call the
-- function, which runs only for the other steps and for refusals. The
-- conditions check only what the service can write: the columns it holds
-- no privilege on keep their defaults (version 1, no outcome, not held,
-- owner_role the login, …) or their values, and the columns the completion
-- does not name keep their values, which a column-specific trigger checks
-- per statement, not per row. A test (internal/db) fails when the
-- service's column privileges change. A condition allows a subset of what
-- the function allows, never more; coalesce(…, false) sends any NULL to
-- the function. WHEN expressions are bound when the trigger is created, so
-- a caller's search_path cannot redirect them (the function pins its own).
-- docs/benchmarks.md, "The state machine enforced for every writer
-- (issue 10)".

-- +goose Up
ALTER TABLE opsdesk.operations ADD COLUMN owner_role text;
-- Set apart from ADD COLUMN, so that existing rows stay NULL.
ALTER TABLE opsdesk.operations ALTER COLUMN owner_role SET DEFAULT session_user;
GRANT SELECT (owner_role) ON opsdesk.operations TO opsdesk_viewer;

-- +goose StatementBegin
CREATE FUNCTION opsdesk.operations_state_machine() RETURNS trigger
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
        ELSIF (NEW.id, NEW.tenant, NEW.tool, NEW.key, NEW.fingerprint, NEW.created_at)
              IS DISTINCT FROM (OLD.id, OLD.tenant, OLD.tool, OLD.key, OLD.fingerprint, OLD.created_at) THEN
            rule := 'id, identity, fingerprint and created_at never change';
        ELSIF NEW.version < OLD.version
           OR (NEW.version = OLD.version AND (NEW.state, NEW.owner, NEW.attempt, NEW.outcome, NEW.result, NEW.result_ref)
               IS DISTINCT FROM (OLD.state, OLD.owner, OLD.attempt, OLD.outcome, OLD.result, OLD.result_ref)) THEN
            rule := 'the version goes up with every change of state, owner, attempt or result, and never down';
        ELSE
            RETURN NEW;
        END IF;

    ELSIF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'pending' OR NEW.attempt <> 1 OR NEW.version <> 1 OR NEW.conflict_count <> 0 OR NEW.held
           OR NEW.outcome IS NOT NULL OR NEW.result IS NOT NULL OR NEW.result_ref IS NOT NULL
           OR NEW.completed_at IS NOT NULL OR NEW.expires_at IS NOT NULL OR NEW.last_conflict_at IS NOT NULL
           OR NEW.created_at <> now() OR NEW.updated_at <> now()
           OR NEW.leased_at IS DISTINCT FROM now() OR NEW.lease_expires_at < now() THEN
            rule := 'a new record is pending, attempt 1, version 1, leased from now, with no outcome';
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
        IF rule IS NULL AND e IS DISTINCT FROM NEW THEN
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

REVOKE ALL ON FUNCTION opsdesk.operations_state_machine() FROM PUBLIC;

-- The reservation (reserveSQL) by a service login. The service inserts
-- no other column, and owner_role defaults to its login.
CREATE TRIGGER operations_state_machine_insert BEFORE INSERT ON opsdesk.operations
    FOR EACH ROW WHEN (NOT coalesce(NEW.state = 'pending' AND NEW.attempt = 1
        AND NEW.leased_at = now() AND NEW.lease_expires_at >= now()
        AND current_setting('is_superuser') = 'off', false))
    EXECUTE FUNCTION opsdesk.operations_state_machine();

-- The completion (completeSQL) by the login holding the lease. It writes
-- state, outcome, result, result_ref, completed_at, expires_at, updated_at
-- and version. The other columns the service may update it does not name,
-- so they keep their values; a completion that names any of them is
-- checked in full by operations_state_machine_kept below. A person's login
-- never holds a lease, so the people's functions always take the
-- function's path.
CREATE TRIGGER operations_state_machine_update BEFORE UPDATE ON opsdesk.operations
    FOR EACH ROW WHEN (NOT coalesce(OLD.state = 'pending' AND NEW.state = 'completed'
        AND OLD.owner_role = session_user AND NEW.version = OLD.version + 1
        AND NEW.updated_at = now() AND NEW.completed_at = now()
        AND (NEW.expires_at IS NULL OR NEW.expires_at >= now()), false))
    EXECUTE FUNCTION opsdesk.operations_state_machine();

-- A column-specific trigger fires only for statements that name one of its
-- columns in SET, a test of the statement, not of each row: the library's
-- completion names none of these and pays nothing for them. Other updates
-- took the function's path above already.
CREATE TRIGGER operations_state_machine_kept
    BEFORE UPDATE OF effect, owner, attempt, leased_at, lease_expires_at, conflict_count, last_conflict_at
    ON opsdesk.operations
    FOR EACH ROW WHEN (OLD.state = 'pending' AND NEW.state = 'completed')
    EXECUTE FUNCTION opsdesk.operations_state_machine();

-- ALWAYS: they fire with session_replication_role = replica too.
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_insert;
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_update;
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER operations_state_machine_kept;
