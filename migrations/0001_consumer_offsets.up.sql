-- Consumer-group progress, one row per (group, topic, queue): the full
-- state of the broker's offset table as of the mirror's 'offsets' cursor,
-- so that the mirror can reload it and continue exactly.
CREATE TABLE consumer_offsets (
    group_name       text        NOT NULL,
    topic            text        NOT NULL,
    -- Queue id; -1 is the topic's view of the group's %RETRY% topic.
    queue_id         integer     NOT NULL,
    -- Lowest offset not yet acknowledged: everything below is consumed.
    committed_offset bigint      NOT NULL CHECK (committed_offset >= 0),
    -- Generation of the last explicit commit/reset (uint32 in the log).
    generation       bigint      NOT NULL DEFAULT 0 CHECK (generation >= 0),
    -- Acknowledged offsets above committed_offset, ascending.
    acked_above      bigint[]    NOT NULL DEFAULT '{}',
    -- Highest offset known to be acknowledged (committed_offset - 1 when
    -- none above it is).
    max_offset_seen  bigint      NOT NULL DEFAULT -1,
    -- false after the mirror had to re-seed this key from the broker's live
    -- progress (its records had been deleted by retention): committed is
    -- then exact only from the key's next explicit commit on.
    exact            boolean     NOT NULL DEFAULT true,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_name, topic, queue_id)
);

COMMENT ON TABLE consumer_offsets IS
    'mqgate: mirrored consumer offsets (projection of the CommitLog; written only by the mirror)';
