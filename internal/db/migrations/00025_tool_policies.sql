-- A tool is configured once (issue 19 §4).
--
-- A tool's policy was declared twice: in Go, where ops.New runs it
-- (effect, lease, retention, after expiry), and in the console's YAML
-- catalog (retention, retry_window, after_expiry, runbook, lookup), and
-- the two could disagree: the console reviewed and purged by a retention
-- the service did not run. ops.New now records each tool's policy here,
-- as the service login, and the console reads it from here; the catalog
-- adds the people's parts (runbook, lookup), and opsdesk doctor names a
-- catalog value that disagrees with the recorded one.
--
-- The attacker's view: a service login may record policies and nothing
-- else. It has no privilege on the table; record_tool_policy, a SECURITY
-- DEFINER function, writes its own row's columns, with the bounds the
-- state machine uses (migration 00024: a lease of at most 24 hours, a
-- retention of at most 876,600 hours), the library's rules for names (1 to
-- 128 bytes, no control character) and at most 1,000 tools, so that a
-- hostile login cannot fill the table or blind a reader with a value no
-- console can show. recorded_by is session_user, never a name the caller
-- gives. People's roles read the table.
--
-- Two services recording different policies for one tool: the last writer
-- wins (a deploy that changes a policy must take effect), and the policy
-- it replaced is kept in previous, with who recorded it and when, so that
-- doctor reports the disagreement, naming both. A write of the same values
-- changes nothing but recorded_at and recorded_by.
--
-- Policies are not per tenant: a tool is the same code for every tenant.
-- The table is small and read whole; in a sharded store it is a reference
-- table.

-- +goose Up
CREATE TABLE opsdesk.tool_policies (
    tool            text        NOT NULL,
    effect          text        NOT NULL,
    lease_us        bigint      NOT NULL,
    retention_us    bigint      NOT NULL,
    retry_window_us bigint      NOT NULL,
    after_expiry    text        NOT NULL,
    recorded_by     text        NOT NULL,
    recorded_at     timestamptz NOT NULL,
    -- The policy this one replaced, when their values differ:
    -- {effect, lease_us, retention_us, retry_window_us, after_expiry,
    -- recorded_by, recorded_at}.
    previous        jsonb,
    changed_at      timestamptz,
    CONSTRAINT tool_policies_pkey PRIMARY KEY (tool),
    CONSTRAINT tool_policies_tool CHECK (octet_length(tool) BETWEEN 1 AND 128 AND tool !~ '[[:cntrl:]]'),
    CONSTRAINT tool_policies_effect CHECK (effect IN ('local', 'external_idempotent', 'external_unknown')),
    CONSTRAINT tool_policies_lease CHECK (lease_us BETWEEN 100000 AND 86400000000),
    CONSTRAINT tool_policies_retention CHECK (retention_us BETWEEN 1 AND 3155760000000000),
    CONSTRAINT tool_policies_retry_window CHECK (retry_window_us BETWEEN 1 AND 3155760000000000),
    CONSTRAINT tool_policies_after_expiry CHECK (after_expiry IN ('reexecute', 'reject'))
);

GRANT SELECT ON opsdesk.tool_policies TO opsdesk_viewer;
GRANT SELECT, INSERT, UPDATE ON opsdesk.tool_policies TO opsdesk_owner;

-- record_tool_policy records one tool's policy as the calling login. It
-- refuses a value out of bounds with check_violation (23514), naming the
-- tool, the value and the bound, and a 1,001st tool with
-- program_limit_exceeded (54000).
-- +goose StatementBegin
CREATE FUNCTION opsdesk.record_tool_policy(
    p_tool text, p_effect text, p_lease_us bigint, p_retention_us bigint,
    p_retry_window_us bigint, p_after_expiry text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    old   opsdesk.tool_policies;
    shown text := quote_literal(coalesce(regexp_replace(left(p_tool, 128), '[[:cntrl:]]', '?', 'g'), ''));
BEGIN
    IF p_tool IS NULL OR octet_length(p_tool) NOT BETWEEN 1 AND 128 OR p_tool ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'tool policy: the tool name % is empty, longer than 128 bytes or holds a control character', shown
            USING ERRCODE = 'check_violation';
    END IF;
    IF p_effect IS NULL OR p_effect NOT IN ('local', 'external_idempotent', 'external_unknown') THEN
        RAISE EXCEPTION 'tool policy of %: effect % is not one of local, external_idempotent, external_unknown',
            shown, quote_nullable(left(p_effect, 40)) USING ERRCODE = 'check_violation';
    END IF;
    IF p_lease_us IS NULL OR p_lease_us NOT BETWEEN 100000 AND 86400000000 THEN
        RAISE EXCEPTION 'tool policy of %: lease of % microseconds is outside 100ms to 24 hours', shown, p_lease_us
            USING ERRCODE = 'check_violation';
    END IF;
    IF p_retention_us IS NULL OR p_retention_us NOT BETWEEN 1 AND 3155760000000000 THEN
        RAISE EXCEPTION 'tool policy of %: retention of % microseconds is outside 1 microsecond to 876600 hours (100 years)',
            shown, p_retention_us USING ERRCODE = 'check_violation';
    END IF;
    IF p_retry_window_us IS NULL OR p_retry_window_us NOT BETWEEN 1 AND 3155760000000000 THEN
        RAISE EXCEPTION 'tool policy of %: retry window of % microseconds is outside 1 microsecond to 876600 hours (100 years)',
            shown, p_retry_window_us USING ERRCODE = 'check_violation';
    END IF;
    IF p_after_expiry IS NULL OR p_after_expiry NOT IN ('reexecute', 'reject') THEN
        RAISE EXCEPTION 'tool policy of %: after expiry % is not one of reexecute, reject',
            shown, quote_nullable(left(p_after_expiry, 40)) USING ERRCODE = 'check_violation';
    END IF;

    -- One writer at a time: the count below and the comparison with the
    -- row replaced see every committed policy. Services write here when
    -- they start, never on a request's path.
    LOCK TABLE opsdesk.tool_policies IN SHARE ROW EXCLUSIVE MODE;
    SELECT * INTO old FROM opsdesk.tool_policies WHERE tool = p_tool;
    IF NOT FOUND THEN
        IF (SELECT count(*) FROM opsdesk.tool_policies) >= 1000 THEN
            RAISE EXCEPTION 'tool policy of %: the store records at most 1000 tools', shown
                USING ERRCODE = 'program_limit_exceeded';
        END IF;
        INSERT INTO opsdesk.tool_policies
            (tool, effect, lease_us, retention_us, retry_window_us, after_expiry, recorded_by, recorded_at)
        VALUES (p_tool, p_effect, p_lease_us, p_retention_us, p_retry_window_us, p_after_expiry,
                session_user, clock_timestamp());
    ELSIF (old.effect, old.lease_us, old.retention_us, old.retry_window_us, old.after_expiry)
          = (p_effect, p_lease_us, p_retention_us, p_retry_window_us, p_after_expiry) THEN
        UPDATE opsdesk.tool_policies SET recorded_by = session_user, recorded_at = clock_timestamp()
        WHERE tool = p_tool;
    ELSE
        UPDATE opsdesk.tool_policies
        SET effect = p_effect, lease_us = p_lease_us, retention_us = p_retention_us,
            retry_window_us = p_retry_window_us, after_expiry = p_after_expiry,
            previous = jsonb_build_object('effect', old.effect, 'lease_us', old.lease_us,
                'retention_us', old.retention_us, 'retry_window_us', old.retry_window_us,
                'after_expiry', old.after_expiry, 'recorded_by', old.recorded_by, 'recorded_at', old.recorded_at),
            changed_at = clock_timestamp(), recorded_by = session_user, recorded_at = clock_timestamp()
        WHERE tool = p_tool;
    END IF;
END
$$;
-- +goose StatementEnd

ALTER FUNCTION opsdesk.record_tool_policy(text, text, bigint, bigint, bigint, text) OWNER TO opsdesk_owner;
REVOKE ALL ON FUNCTION opsdesk.record_tool_policy(text, text, bigint, bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opsdesk.record_tool_policy(text, text, bigint, bigint, bigint, text) TO opsdesk_service;

