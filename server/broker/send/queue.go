package send

import "hash/fnv"

// ShardQueue is the queue of a sharding key among queues (RocketMQ's
// MessageQueueSelector: the key's FNV-1a hash mod queues), so that the
// messages of one key stay in one queue, in order.
func ShardQueue(key string, queues int) int32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int32(h.Sum32() % uint32(queues))
}

// RoundRobin is the queue of the n-th send without a sharding key among
// queues (the broker counts the sends, one counter for all topics).
func RoundRobin(n uint32, queues int) int32 { return int32(n % uint32(queues)) }
