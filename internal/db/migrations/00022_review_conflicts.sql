-- The retention review's "conflicted" figure without reading a record per
-- conflict (issue 13, section 7; docs/benchmarks.md).
--
-- The review counts, per tool, the expired, unheld, completed records that
-- have at least one unreviewed conflicting attempt: a purge leaves them.
-- It found them by joining every unreviewed conflict to its record, one
-- primary-key probe and one heap page per conflict: 4,891 probes and 72 of
-- the review's 85 ms at 10,000,000 records, where every other figure stops
-- at the count cap. A partial index on the records with conflicts made the
-- join index-only, but a join over every conflict still grew with them
-- (about 12 ms of 20 at 10M, 2.3 times the 1M review).
--
-- opsdesk.record_conflicts keeps, for each record that has conflicting
-- attempts, what the figure needs: whether any is unreviewed, and the
-- record's state, hold and expiry. The review counts its rows, index-only.
--
-- Triggers keep it, for every writer, as the tables' owner:
--
-- * every change of a record's conflicts (insert, review, identity, delete;
--   the library, people's functions, purges, the superuser) refreshes that
--   record's row;
-- * every change of a record's state, hold, expiry or conflict count
--   refreshes it too, when the record counts conflicts (conflict_count > 0)
--   before or after. That condition keeps the library's hot writes free of
--   any function call: its records have no conflicts (DoTx inserts, which
--   never have any, fire nothing; a completion of a record without
--   conflicts evaluates the condition only).
--
-- The library counts every conflict it records (conflict_count + 1 in the
-- same statement), but other writers may not: a conflict inserted by hand
-- on a record whose count is 0. Such a row is marked untracked (tracked
-- false) and the review reads its record instead; a count crossing 0 fires
-- the refresh either way, so a tracked row's facts are always its record's.
--
-- Concurrency. A refresh locks the record (FOR NO KEY UPDATE, the lock an
-- update of its state takes too) before it reads the record and its
-- conflicts, so refreshes and state changes of one record take turns, and
-- under READ COMMITTED the later one reads what the earlier committed. A
-- refresh always writes the record's row (an upsert whose update always
-- applies), so under REPEATABLE READ a refresh whose snapshot missed a
-- concurrent refresh fails with a serialization error instead of writing
-- stale facts. Rows go when their record does (a refresh that finds no
-- record deletes its row): records with conflicts can only be deleted in
-- the statement that deletes their conflicts (migration 00010, a purge's
-- batch), which refreshes them, and deleting a record that counts
-- conflicts refreshes it too.
--
-- A session that disables triggers (session_replication_role = replica)
-- would bypass it, so the triggers are ENABLE ALWAYS, like the state
-- machine's.

-- +goose Up
CREATE TABLE opsdesk.record_conflicts (
    tenant     text        NOT NULL,
    tool       text        NOT NULL,
    key        text        NOT NULL,
    -- At least one of the record's conflicting attempts is unreviewed.
    unreviewed boolean     NOT NULL,
    -- The record's conflict_count > 0: its own triggers keep the facts
    -- below current. When false the review reads the record instead.
    tracked    boolean     NOT NULL,
    state      text        NOT NULL,
    held       boolean     NOT NULL,
    expires_at timestamptz,
    CONSTRAINT record_conflicts_pkey PRIMARY KEY (tenant, tool, key)
);

-- The review's count: a range per tool, index-only (the tenant for the
-- people's policy).
CREATE INDEX record_conflicts_review_idx ON opsdesk.record_conflicts (tool, expires_at) INCLUDE (tenant)
    WHERE unreviewed AND tracked AND state = 'completed' AND NOT held;
-- The few rows whose record the review reads.
CREATE INDEX record_conflicts_untracked_idx ON opsdesk.record_conflicts (tool) INCLUDE (tenant)
    WHERE unreviewed AND NOT tracked;

GRANT SELECT ON opsdesk.record_conflicts TO opsdesk_viewer;
ALTER TABLE opsdesk.record_conflicts ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY people ON opsdesk.record_conflicts TO opsdesk_viewer, opsdesk_owner
    USING ((SELECT opsdesk.sees_every_tenant()) OR tenant = ANY ((SELECT opsdesk.visible_tenants())::text[]));
-- The migrating role owns the table and the functions that write it.
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('CREATE POLICY migrator ON opsdesk.record_conflicts TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;
-- +goose StatementEnd

-- record_conflicts_refresh brings one record's row up to date: see above.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.record_conflicts_refresh(p_tenant text, p_tool text, p_key text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION opsdesk.record_conflicts_track() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd
REVOKE ALL ON FUNCTION opsdesk.record_conflicts_refresh(text, text, text), opsdesk.record_conflicts_track() FROM PUBLIC;

CREATE TRIGGER record_conflicts_of_conflicts AFTER INSERT OR DELETE OR UPDATE OF reviewed_at, tenant, tool, key
    ON opsdesk.conflicts FOR EACH ROW EXECUTE FUNCTION opsdesk.record_conflicts_track();
CREATE TRIGGER record_conflicts_of_conflicts_truncate AFTER TRUNCATE
    ON opsdesk.conflicts FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.record_conflicts_track();
-- A record's identity changes, and the record goes, only without
-- conflicts (migration 00010), but its count may be above 0: its old row
-- goes (and under a new identity a new one comes).
CREATE TRIGGER record_conflicts_of_operations AFTER UPDATE OF state, held, expires_at, conflict_count, tenant, tool, key
    ON opsdesk.operations FOR EACH ROW WHEN (OLD.conflict_count > 0 OR NEW.conflict_count > 0)
    EXECUTE FUNCTION opsdesk.record_conflicts_track();
CREATE TRIGGER record_conflicts_of_operations_delete AFTER DELETE
    ON opsdesk.operations FOR EACH ROW WHEN (OLD.conflict_count > 0)
    EXECUTE FUNCTION opsdesk.record_conflicts_track();
-- Records truncated: none is left (and no conflict, migration 00010).
CREATE TRIGGER record_conflicts_of_operations_truncate AFTER TRUNCATE
    ON opsdesk.operations FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.record_conflicts_track();
ALTER TABLE opsdesk.conflicts ENABLE ALWAYS TRIGGER record_conflicts_of_conflicts;
ALTER TABLE opsdesk.conflicts ENABLE ALWAYS TRIGGER record_conflicts_of_conflicts_truncate;
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER record_conflicts_of_operations;
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER record_conflicts_of_operations_delete;
ALTER TABLE opsdesk.operations ENABLE ALWAYS TRIGGER record_conflicts_of_operations_truncate;

-- The records with conflicts today: those that count some, and those a
-- conflict names.
INSERT INTO opsdesk.record_conflicts (tenant, tool, key, unreviewed, tracked, state, held, expires_at)
SELECT o.tenant, o.tool, o.key,
    EXISTS (SELECT FROM opsdesk.conflicts c
            WHERE c.tenant = o.tenant AND c.tool = o.tool AND c.key = o.key AND c.reviewed_at IS NULL),
    o.conflict_count > 0, o.state, o.held, o.expires_at
FROM (SELECT tenant, tool, key FROM opsdesk.operations WHERE conflict_count > 0
      UNION SELECT tenant, tool, key FROM opsdesk.conflicts) i
JOIN opsdesk.operations o ON o.tenant = i.tenant AND o.tool = i.tool AND o.key = i.key;
