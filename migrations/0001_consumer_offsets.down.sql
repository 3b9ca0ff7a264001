DROP TABLE IF EXISTS consumer_offsets;
