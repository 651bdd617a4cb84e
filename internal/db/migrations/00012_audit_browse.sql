-- The audit browser (opsdesk audit list, the console's :audit) pages the
-- trail newest first across every chain, in the order
-- (at DESC, tenant DESC, seq DESC), and filters it by tenant, role,
-- action, outcome, tool, key and operation (internal/storeview/audit.go).
--
-- One index holds the order for unfiltered pages and for filters that keep
-- many records. Each filter on one value of a column has an index that
-- leads with the column and then holds the order, so that a rare value
-- found only in old records is still the first rows of an index scan,
-- never a walk backwards through the whole trail. Key and operation are
-- near-unique: a plain index finds their few records, which are then
-- sorted. Records are appended at the speed people decide, so the indexes
-- cost the write path next to nothing.
--
-- Row-level security reads each row's tenant; every index below holds it.

-- +goose Up
CREATE INDEX audit_browse_idx ON opsdesk.audit (at, tenant, seq);
CREATE INDEX audit_browse_tenant_idx ON opsdesk.audit (tenant, at, seq);
CREATE INDEX audit_browse_role_idx ON opsdesk.audit (role, at, tenant, seq);
CREATE INDEX audit_browse_action_idx ON opsdesk.audit (action, at, tenant, seq);
CREATE INDEX audit_browse_outcome_idx ON opsdesk.audit (outcome, at, tenant, seq);
CREATE INDEX audit_browse_tool_idx ON opsdesk.audit (tool, at, tenant, seq) WHERE tool IS NOT NULL;
-- text_pattern_ops: key:run-42* is a LIKE prefix, which a column's own
-- collation serves only in the C locale.
CREATE INDEX audit_browse_key_idx ON opsdesk.audit (key text_pattern_ops) INCLUDE (tenant) WHERE key IS NOT NULL;
-- audit_operation_idx leads with the tenant; a filter on operations alone
-- needs this one.
CREATE INDEX audit_browse_operation_idx ON opsdesk.audit (operation_id) INCLUDE (tenant) WHERE operation_id IS NOT NULL;

