package broker

// scheduledForDeleted reports whether the schedule entry at offset of
// level, going to d, belongs to a deleted topic.
func (b *Broker) scheduledForDeleted(d ladderDest, level int, offset int64) bool {
	return false
}
