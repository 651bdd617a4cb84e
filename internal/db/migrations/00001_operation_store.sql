-- The operation store: one row per operation identity, and every refused
-- attempt that reused an identity with a different intent.
--
-- Every primary and unique key starts with tenant, the distribution key, so
-- the schema can move to a sharded PostgreSQL (Citus) unchanged.

-- +goose Up
CREATE TABLE opsdesk.operations (
    tenant           text        NOT NULL,
    tool             text        NOT NULL,
    key              text        NOT NULL,
    -- A short number for people to type; identity is (tenant, tool, key).
    id               bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    tool_version     text        NOT NULL,
    -- SHA-256 of the RFC 8785 canonical JSON of {tool, version, intent}.
    fingerprint      bytea       NOT NULL,
    effect           text        NOT NULL,
    state            text        NOT NULL,
    outcome          text,
    owner            text,
    -- Fencing token: bumped by every takeover; completion is a
    -- compare-and-set on (owner, attempt).
    attempt          integer     NOT NULL DEFAULT 1,
    leased_at        timestamptz,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    -- Retention: when a completed record may be purged (NULL: never).
    expires_at       timestamptz,
    result           jsonb,
    result_ref       text,
    -- Bumped by every change of state, ownership or result; operators
    -- compare-and-set on it. Lease renewals and conflict counts leave it
    -- alone: they change nothing an operator decides on.
    version          bigint      NOT NULL DEFAULT 1,
    conflict_count   integer     NOT NULL DEFAULT 0,
    last_conflict_at timestamptz,

    CONSTRAINT operations_pkey PRIMARY KEY (tenant, tool, key),
    CONSTRAINT operations_key_length CHECK (octet_length(key) BETWEEN 1 AND 255),
    CONSTRAINT operations_fingerprint_length CHECK (octet_length(fingerprint) = 32),
    CONSTRAINT operations_effect CHECK (effect IN ('local', 'external_idempotent', 'external_unknown')),
    CONSTRAINT operations_state CHECK (state IN ('pending', 'completed', 'released')),
    CONSTRAINT operations_outcome CHECK (
        (state = 'completed' AND outcome IN ('succeeded', 'rejected') AND completed_at IS NOT NULL)
        OR (state <> 'completed' AND outcome IS NULL)),
    CONSTRAINT operations_pending_lease CHECK (
        state <> 'pending'
        OR (owner IS NOT NULL AND leased_at IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT operations_attempt CHECK (attempt >= 1),
    CONSTRAINT operations_version CHECK (version >= 1),
    CONSTRAINT operations_conflict_count CHECK (conflict_count >= 0)
);

-- Finding a record by the number an operator typed (ops show ID).
CREATE INDEX operations_id_idx ON opsdesk.operations (id);

-- Stuck records: pending rows whose lease has expired.
CREATE INDEX operations_pending_lease_idx ON opsdesk.operations (lease_expires_at)
    WHERE state = 'pending';

CREATE TABLE opsdesk.conflicts (
    tenant               text        NOT NULL,
    id                   bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    tool                 text        NOT NULL,
    key                  text        NOT NULL,
    operation_id         bigint      NOT NULL,
    tool_version         text        NOT NULL,
    -- The refused attempt's fingerprint and the stored one it did not match.
    fingerprint          bytea       NOT NULL,
    original_fingerprint bytea       NOT NULL,
    owner                text        NOT NULL,
    attempted_at         timestamptz NOT NULL DEFAULT now(),
    -- Set when an operator acknowledges the conflict (audit issue).
    reviewed_at          timestamptz,
    reviewed_by          text,

    CONSTRAINT conflicts_pkey PRIMARY KEY (tenant, id),
    CONSTRAINT conflicts_operation_fkey FOREIGN KEY (tenant, tool, key)
        REFERENCES opsdesk.operations (tenant, tool, key) ON DELETE RESTRICT,
    CONSTRAINT conflicts_fingerprint_length CHECK (octet_length(fingerprint) = 32),
    CONSTRAINT conflicts_original_fingerprint_length CHECK (octet_length(original_fingerprint) = 32),
    CONSTRAINT conflicts_reviewed CHECK ((reviewed_at IS NULL) = (reviewed_by IS NULL))
);

-- A record's conflicting attempts (detail view), and the foreign key's
-- check when a record is purged: a record keeps its conflicts, so purging
-- one must deal with them first.
CREATE INDEX conflicts_identity_idx ON opsdesk.conflicts (tenant, tool, key);

-- The library's group role. Services log in with their own roles and are
-- granted this one. Roles are cluster-wide: a role that exists is used as it
-- is (so a database owner without CREATEROLE can migrate once an
-- administrator created it), and several databases may race to create it:
-- the loser of the race carries on.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'opsdesk_service') THEN
        CREATE ROLE opsdesk_service NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;
-- +goose StatementEnd

REVOKE ALL ON SCHEMA opsdesk FROM PUBLIC;
GRANT USAGE ON SCHEMA opsdesk TO opsdesk_service;

-- Reserve, complete, release and take over records; never delete them,
-- rewrite their identity or fingerprint, or insert them complete.
GRANT SELECT ON opsdesk.operations TO opsdesk_service;
GRANT INSERT (tenant, tool, key, tool_version, fingerprint, effect, state, owner, attempt,
              leased_at, lease_expires_at)
    ON opsdesk.operations TO opsdesk_service;
GRANT UPDATE (effect, owner, attempt, state, outcome, leased_at, lease_expires_at, updated_at,
              completed_at, expires_at, result, result_ref, version, conflict_count,
              last_conflict_at)
    ON opsdesk.operations TO opsdesk_service;
-- Record refused attempts (and learn the new row's id); never read their
-- contents, change or review them.
GRANT INSERT (tenant, tool, key, operation_id, tool_version, fingerprint, original_fingerprint, owner),
      SELECT (id)
    ON opsdesk.conflicts TO opsdesk_service;
