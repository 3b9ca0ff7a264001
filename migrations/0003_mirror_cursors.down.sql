DROP TABLE IF EXISTS mirror_cursors;
