-- Every completed record has a retention expiry: the library sets it when
-- the record completes. The console's retention sort relies on it (it
-- orders completed records by their expiry, from operations_retention_idx,
-- and the others after them), and so will the purge.

-- +goose Up
ALTER TABLE opsdesk.operations ADD CONSTRAINT operations_completed_expiry
    CHECK (state <> 'completed' OR expires_at IS NOT NULL);
