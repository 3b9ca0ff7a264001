package retention

import (
	"sync"

	"github.com/mqgate/mqgate/storage/offset"
)

// droppedCounts are the unconsumed messages retention took from each
// progress key since the broker started (the progress field).
type droppedCounts struct {
	mu sync.Mutex
	n  map[offset.Key]int64
}

func (d *droppedCounts) add(k offset.Key, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[offset.Key]int64{}
	}
	d.n[k] += n
}

func (d *droppedCounts) get(k offset.Key) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[k]
}

func (d *droppedCounts) forget(group string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.n {
		if offset.Forgets(group, k.Group) {
			delete(d.n, k)
		}
	}
}
