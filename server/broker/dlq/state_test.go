package dlq

import (
	"sync"
	"testing"
	"time"
)

func TestTableApply(t *testing.T) {
	var x Table
	if x.Status("g", goldenID0) != Dead || x.Len() != 0 {
		t.Fatal("an empty table")
	}
	at := goldenDLQAt.UTC()
	x.Apply(StatusRecord{Group: "g", MessageID: goldenID0, Status: Discarded, At: at},
		StatusRecord{Group: "g2", MessageID: goldenID0, Status: Resent, At: at})
	if r, ok := x.Get("g", goldenID0); !ok || r.Status != Discarded || !r.At.Equal(at) {
		t.Fatalf("%+v %v", r, ok)
	}
	if x.Status("g2", goldenID0) != Resent || x.Status("g", goldenID1) != Dead || x.Len() != 2 {
		t.Fatal("per group and id")
	}
	// In order: the newest record of a letter wins, whatever its time.
	x.Apply(StatusRecord{Group: "g", MessageID: goldenID0, Status: Resent, At: at.Add(-time.Hour)})
	if r, _ := x.Get("g", goldenID0); r.Status != Resent || !r.At.Equal(at.Add(-time.Hour)) {
		t.Fatalf("%+v", r)
	}
	// Names that would collide joined by "/" (records are not checked).
	x.Apply(StatusRecord{Group: "a/b", MessageID: "c", Status: Resent}, StatusRecord{Group: "a", MessageID: "b/c", Status: Discarded})
	if x.Status("a/b", "c") != Resent || x.Status("a", "b/c") != Discarded {
		t.Fatal("keys collide")
	}
}

func TestTableConcurrent(t *testing.T) {
	var x Table
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				x.LockChange()
				if x.Status("g", "id") == Dead {
					x.Apply(StatusRecord{Group: "g", MessageID: "id", Status: Resent, At: time.UnixMilli(int64(i*1000 + j))})
				}
				x.UnlockChange()
				_ = x.Len()
			}
		}()
	}
	wg.Wait()
	if x.Len() != 1 {
		t.Fatal(x.Len())
	}
}
