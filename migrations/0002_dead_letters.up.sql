-- Dead letters of every group, without bodies (the CommitLog keeps those).
CREATE TABLE dead_letters (
    group_name        text        NOT NULL,
    -- The dead letter's own message id (the one to resend or discard).
    message_id        text        NOT NULL,
    -- Queue offset in %DLQ%<group>: arrival order, and the listing cursor.
    -- NULL (with dead_at) only while a status change has been mirrored
    -- before the arrival itself; such rows are not listed.
    dlq_offset        bigint,
    origin_message_id text        NOT NULL DEFAULT '',
    original_topic    text        NOT NULL DEFAULT '',
    reconsume_times   integer     NOT NULL DEFAULT 0,
    last_reason       text        NOT NULL DEFAULT '',
    first_failed_at   timestamptz,
    dead_at           timestamptz,
    status            text        NOT NULL DEFAULT 'dead'
                                  CHECK (status IN ('dead', 'resent', 'discarded')),
    status_at         timestamptz,
    resent_at         timestamptz,
    -- Failed deliveries, oldest first: [{"at","outcome","reason","delayLevel"}].
    attempts          jsonb       NOT NULL DEFAULT '[]',
    tag               text        NOT NULL DEFAULT '',
    keys              text[]      NOT NULL DEFAULT '{}',
    properties        jsonb       NOT NULL DEFAULT '{}',
    mirrored_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_name, message_id)
);

-- The admin listing pages by (group, dlq_offset); the other indexes serve
-- its filters and dashboards. "reason contains" is a residual filter on
-- the group's rows (a trigram index would need the pg_trgm extension,
-- which is per database and not ours to install).
CREATE INDEX dead_letters_group_offset ON dead_letters (group_name, dlq_offset);
CREATE INDEX dead_letters_group_dead_at ON dead_letters (group_name, dead_at);
CREATE INDEX dead_letters_group_topic ON dead_letters (group_name, original_topic, dlq_offset);
CREATE INDEX dead_letters_group_status ON dead_letters (group_name, status, dlq_offset);

COMMENT ON TABLE dead_letters IS
    'mqgate: mirrored dead-letter metadata (projection of the CommitLog; written only by the mirror)';
