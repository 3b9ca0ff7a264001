-- The mirror's position in each CommitLog stream it follows, updated in
-- the same transaction as the rows derived from it (exactly-once).
-- Streams: 'offsets' (ack and commit records), 'dlq_status' (resend and
-- discard records), 'dlq:<group>' (the group's %DLQ% queue).
CREATE TABLE mirror_cursors (
    stream     text        PRIMARY KEY,
    -- Next stream offset to read: every record below it is mirrored.
    position   bigint      NOT NULL CHECK (position >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE mirror_cursors IS
    'mqgate: mirror cursors; the next CommitLog stream offset to mirror';
