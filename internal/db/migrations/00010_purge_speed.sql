-- A faster purge (issue 5): docs/benchmarks.md, "Purging under library
-- traffic (issue 5, second measurement)". A batch of 1,000 took about
-- 29 ms alone: it found its records by id three times over, wrote each
-- tombstone through ON CONFLICT's speculative insertion into two b-trees,
-- and the foreign key from conflicts ran one query per deleted record.
-- This migration changes the tombstones' index and the foreign key;
-- migration 00014 writes purge_batch anew (one statement).

-- +goose Up

-- Tombstones are written in expiry order (more or less): a BRIN index
-- finds the expired ones for a cleanup as well as the b-tree did, at a
-- fraction of the cost of each insert.
DROP INDEX opsdesk.tombstones_expiry_idx;
CREATE INDEX tombstones_expiry_idx ON opsdesk.tombstones USING brin (expires_at);

-- The foreign key from a conflict to its record, kept by triggers instead
-- of conflicts_operation_fkey: the built-in check runs one query per
-- deleted record, these one per deleting statement. The guarantees are
-- the same (and one more: the record's id must match too): a conflict is
-- only ever recorded against a record that exists
-- (and keeps it from being deleted until the conflict commits), and a
-- record with conflicts cannot be deleted, have its identity changed or be
-- truncated away, so a conflict never points at nothing or at a later
-- record of the same identity. A violation raises foreign_key_violation
-- naming conflicts_operation_fkey, as before.
--
-- Like the built-in checks, which run as the tables' owner, these
-- functions run as the migrating role (the tables' owner, which the
-- migrator policies let see every tenant), not as opsdesk_owner, whose
-- view is the calling person's tenants.
ALTER TABLE opsdesk.conflicts DROP CONSTRAINT conflicts_operation_fkey;

-- +goose StatementBegin
CREATE FUNCTION opsdesk.conflict_needs_record() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd
CREATE TRIGGER conflicts_operation_fkey AFTER INSERT OR UPDATE OF tenant, tool, key ON opsdesk.conflicts
    FOR EACH ROW EXECUTE FUNCTION opsdesk.conflict_needs_record();

-- records_keep_conflicts refuses to delete, rename or truncate records
-- that conflicts point at. For deletes it reads the latest committed
-- conflicts, which only READ COMMITTED gives a function: a conflict
-- committed after a REPEATABLE READ snapshot would go unseen.
-- +goose StatementBegin
CREATE FUNCTION opsdesk.records_keep_conflicts() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
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
-- +goose StatementEnd
CREATE TRIGGER conflicts_operation_fkey_delete AFTER DELETE ON opsdesk.operations
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.records_keep_conflicts();
CREATE TRIGGER conflicts_operation_fkey_update BEFORE UPDATE OF tenant, tool, key ON opsdesk.operations
    FOR EACH ROW WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant OR OLD.tool IS DISTINCT FROM NEW.tool OR OLD.key IS DISTINCT FROM NEW.key)
    EXECUTE FUNCTION opsdesk.records_keep_conflicts();
CREATE TRIGGER conflicts_operation_fkey_truncate BEFORE TRUNCATE ON opsdesk.operations
    FOR EACH STATEMENT EXECUTE FUNCTION opsdesk.records_keep_conflicts();
REVOKE ALL ON FUNCTION opsdesk.conflict_needs_record(), opsdesk.records_keep_conflicts() FROM PUBLIC;
