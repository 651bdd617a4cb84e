-- What a purged record leaves behind: its identity and fingerprint, when
-- it was purged, and until when the tombstone lasts (the tool's retry and
-- recovery window). A late retry of a tool whose policy rejects retries
-- after expiry meets it and gets ops.ErrExpired instead of running again;
-- a lookup of the identity says the record was purged, and when.

-- +goose Up
CREATE TABLE opsdesk.tombstones (
    tenant       text        NOT NULL,
    tool         text        NOT NULL,
    key          text        NOT NULL,
    operation_id bigint      NOT NULL,
    fingerprint  bytea       NOT NULL,
    purged_at    timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    CONSTRAINT tombstones_pkey PRIMARY KEY (tenant, tool, key),
    CONSTRAINT tombstones_fingerprint_length CHECK (octet_length(fingerprint) = 32)
);
CREATE INDEX tombstones_expiry_idx ON opsdesk.tombstones (expires_at);

-- The library reads them; people see when a record went, not its
-- fingerprint.
GRANT SELECT ON opsdesk.tombstones TO opsdesk_service;
GRANT SELECT (tenant, tool, key, operation_id, purged_at, expires_at) ON opsdesk.tombstones TO opsdesk_viewer;
GRANT SELECT, INSERT, DELETE ON opsdesk.tombstones TO opsdesk_owner;

ALTER TABLE opsdesk.tombstones ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY service ON opsdesk.tombstones TO opsdesk_service USING (true);
CREATE POLICY people ON opsdesk.tombstones TO opsdesk_viewer, opsdesk_owner
    USING ((SELECT opsdesk.sees_every_tenant()) OR tenant = ANY ((SELECT opsdesk.visible_tenants())::text[]));
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('CREATE POLICY migrator ON opsdesk.tombstones TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;
-- +goose StatementEnd
