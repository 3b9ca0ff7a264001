-- Consumer instances of broadcasting groups (X-Mqgate-Client-Id) have
-- progress of their own: one row per (group, client id, topic, queue).
-- The group's own rows have client_id ''.
ALTER TABLE consumer_offsets ADD COLUMN client_id text NOT NULL DEFAULT '';
ALTER TABLE consumer_offsets DROP CONSTRAINT consumer_offsets_pkey;
ALTER TABLE consumer_offsets ADD PRIMARY KEY (group_name, client_id, topic, queue_id);

COMMENT ON COLUMN consumer_offsets.client_id IS
    'mqgate: the consumer instance of a broadcasting group the row is the progress of ('''' for the group''s own)';
