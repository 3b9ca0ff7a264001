DROP TABLE IF EXISTS dead_letters;
