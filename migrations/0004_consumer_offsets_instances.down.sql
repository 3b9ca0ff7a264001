-- The instances' rows cannot live without the column: they go (the
-- mirror's offsets projection no longer has them; a SeedOffsets or a
-- re-seed from live progress brings the group's own rows back exactly).
DELETE FROM consumer_offsets WHERE client_id <> '';
ALTER TABLE consumer_offsets DROP CONSTRAINT consumer_offsets_pkey;
ALTER TABLE consumer_offsets ADD PRIMARY KEY (group_name, topic, queue_id);
ALTER TABLE consumer_offsets DROP COLUMN client_id;
