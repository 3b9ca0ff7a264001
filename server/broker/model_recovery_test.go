package broker_test

// The model-based test of the broker (model_test.go): restarts, crash
// restarts (crashCopy), offset resets, and the checks and final drain that
// compare the broker with the model.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/mqgate/mqgate/server/broker"
)

// restartLeases applies a restart: leases survive it (lease_log.go). A
// held lease keeps its receipt and its deadline, so its message is not
// delivered again before the lease ends, and ends as any lease does (an
// ok ack, or the retry path once it expires). Only what a crash copy
// makes open is loosened: a lease that may have expired before the copy
// may have been sent back with the copy holding part of it (the retry
// copy without the progress record that ends the lease: two retries), and
// so may a send-back that was in flight.
func (m *model) restartLeases(at time.Time, crash bool) {
	for g := range mdlGroups {
		for _, e := range m.entriesOf(g) {
			if e.fuzzy {
				continue
			}
			if crash && m.tolerate && m.retryAtRisk(e, at) {
				// Known bug (TestModelRetryDuplicatedAfterCrash): after a
				// crash the scheduler may deliver a retry a second time.
				if e.cur != nil {
					m.fail(e.cur)
				}
				m.stats.knownBug++
				m.makeFuzzy(e, "known bug: retry may be duplicated by a crash")
				continue
			}
			switch {
			case crash && e.st == stHeld && !e.cur.liveAt(at):
				// Its receipt stays held: the lease is restored unless the
				// send-back ended it, so an ack may still answer ok.
				m.makeFuzzy(e, "lease may have expired during the crash copy")
			case crash && e.unconfirmed:
				m.makeFuzzy(e, "send-back may have been in flight at the crash")
			case e.st == stHeld:
				m.stats.heldAcross++
			}
			e.unconfirmed = false
			m.note(e, "restart (crash %v) -> %s", crash, e.st)
		}
	}
	m.gen++
}

// retryAtRisk: a retry copy of e may have been delivered by the scheduler
// before time at, so a crash may make the scheduler deliver that copy again
// (TestModelRetryDuplicatedAfterCrash) — also an earlier copy than the
// current one.
func (m *model) retryAtRisk(e *entry, at time.Time) bool {
	if e.retried {
		return true
	}
	switch e.st {
	case stDead:
		return e.deadRecon >= 1
	case stPending:
		return e.kind == retryCopy && (e.inQueue || !at.Before(e.notBefore))
	}
	return false
}

func (m *model) restart(t *rapid.T) {
	if err := m.b.Close(m.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	closed := time.Now()
	m.b = nil
	m.open(m.dir)
	m.restartLeases(closed, false)
	m.stats.restarts++
	t.Logf("clean restart (gen %d)", m.gen)
}

func (m *model) crashRestart(t *rapid.T) {
	dst, err := os.MkdirTemp(m.root, "crash")
	if err != nil {
		t.Fatal(err)
	}
	if err := crashCopy(m.dir, dst); err != nil {
		t.Fatalf("crash copy: %v", err)
	}
	copied := time.Now()
	if err := m.b.Close(m.ctx); err != nil {
		t.Fatalf("close of the crashed broker: %v", err)
	}
	m.b = nil
	_ = os.RemoveAll(m.dir)
	m.open(dst)
	m.restartLeases(copied, true)
	m.epoch++
	m.stats.crashes++
	t.Logf("crash restart (gen %d)", m.gen)
}

// crashCopy copies the live data directory src to dst as a process crash
// leaves it: files as the page cache has them, nothing fsynced on purpose.
// The order mimics the order in which a crash can see state: files that
// describe the CommitLog (config snapshots, checkpoint) are taken before
// the derived files they vouch for, and the CommitLog last, so nothing
// copied refers to log bytes the copy lacks.
func crashCopy(src, dst string) error {
	copyTree := func(sub string, filter func(rel string) bool) error {
		root := filepath.Join(src, sub)
		return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != src && filter != nil && !filter(rel) {
					return fs.SkipDir
				}
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			if filter != nil && !filter(rel) {
				return nil
			}
			data, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a temp file renamed away meanwhile
			}
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
		})
	}
	topLevelFiles := func(rel string) bool { return !strings.Contains(rel, string(filepath.Separator)) && rel != "." }
	for _, step := range []struct {
		sub    string
		filter func(string) bool
	}{
		{"config", nil},
		{".", func(rel string) bool {
			return topLevelFiles(rel) && !slices.Contains([]string{"commitlog", "consumequeue", "index", "config", "timers"}, rel)
		}},
		{"timers", nil},
		{"consumequeue", nil},
		{"index", nil},
	} {
		if err := copyTree(step.sub, step.filter); err != nil {
			return err
		}
	}
	return copySegmentsNewestFirst(filepath.Join(src, "commitlog"), filepath.Join(dst, "commitlog"))
}

// copySegmentsNewestFirst copies the CommitLog's files from the newest
// segment down. Retention deletes segments oldest first while the copy
// runs: copied in this order, a segment it deletes meanwhile is missing
// from the bottom of the copy (as retention could have left it), never
// from its middle (a hole no crash can leave). The older segments are
// sealed, so only the newest changes while it is read.
func copySegmentsNewestFirst(src, dst string) error {
	entries, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for i := len(entries) - 1; i >= 0; i-- { // ReadDir sorts by name: numbered names sort by offset
		e := entries[i]
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted by retention (or a temp file renamed) meanwhile
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// reset moves one group back to the beginning of the topic. Everything may
// be delivered to it again (the model allows any number of further
// deliveries); what was still owed must still arrive, and an original that
// was never acknowledged is available at once.
func (m *model) reset(t *rapid.T) {
	g := rapid.IntRange(0, 1).Draw(t, "group")
	if _, err := m.b.ResetOffset(m.ctx, mdlGroups[g], mdlTopic, time.Unix(0, 0)); err != nil {
		t.Fatalf("reset offset: %v", err)
	}
	tEnd := time.Now()
	for _, e := range m.entriesOf(g) {
		risky := false // a lease the reaper may have taken (and acked in the new generation) around the reset
		for _, r := range m.rcList {
			if r.g == g && r.body == e.body && r.state == rcHeld && r.kind == origCopy {
				m.fail(r)
				risky = risky || !r.liveAt(tEnd)
			}
		}
		origUnacked := !e.fuzzy && e.kind == origCopy && (e.st == stPending || (e.st == stHeld && !risky))
		m.makeFuzzy(e, "offset reset")
		e.mustSeeOrig = origUnacked
		m.note(e, "reset: mustSeeOrig %v", origUnacked)
	}
	m.maxRecon[g] = map[string]int32{}
	m.stats.resets++
	t.Logf("reset %s to the beginning", mdlGroups[g])
}

// ---- invariants ----

func (m *model) check() {
	for g := range mdlGroups {
		m.checkDLQ(g)
	}
}

func (m *model) checkDLQ(g int) {
	t := m.rt
	var all []broker.DeadLetter
	cursor := ""
	for {
		page, next, err := m.b.ListDeadLetters(m.ctx, mdlGroups[g], broker.DLQFilter{}, cursor, 100)
		if err != nil {
			t.Fatalf("list dead letters: %v", err)
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	listed := map[string]bool{}
	now := time.Now()
	for _, d := range all {
		if listed[d.MessageID] {
			t.Fatalf("dead letter %s listed twice", d.MessageID)
		}
		listed[d.MessageID] = true
		body, ok := m.byID[d.OriginMessageID]
		if !ok || d.OriginalTopic != mdlTopic || d.Status != broker.DLQDead {
			t.Fatalf("dead letter %+v: unknown origin, wrong topic or status", d)
		}
		if m.dlq[g][d.MessageID] {
			continue
		}
		m.dlq[g][d.MessageID] = true
		m.stats.dead++
		e := m.ents[g][body]
		e.deadSeen++
		m.note(e, "dead letter r%d listed", d.ReconsumeTimes)
		t.Logf("dead letter in %s: %.4s r%d", mdlGroups[g], body, d.ReconsumeTimes)
		if e.fuzzy {
			continue
		}
		switch e.st {
		case stDead:
		case stHeld:
			if e.recon < mdlRetryMax || e.cur.liveAt(now) {
				m.fatal(e, "%v: dead-lettered while its lease is live or retries remain", e)
			}
			m.fail(e.cur)
			e.st, e.deadRecon, e.cur = stDead, e.recon, nil
			e.deadExpected++
		default:
			m.fatal(e, "%v: unexpected dead letter (reconsumeTimes %d)", e, d.ReconsumeTimes)
		}
		e.unconfirmed = false
		if d.ReconsumeTimes != e.deadRecon+1 {
			m.fatal(e, "%v: dead letter has reconsumeTimes %d, want %d", e, d.ReconsumeTimes, e.deadRecon+1)
		}
		if e.deadSeen > e.deadExpected {
			m.fatal(e, "%v: dead-lettered %d times, expected %d", e, e.deadSeen, e.deadExpected)
		}
	}
	for id := range m.dlq[g] {
		if !listed[id] {
			t.Fatalf("dead letter %s of %s is no longer listed", id, mdlGroups[g])
		}
	}
	for _, e := range m.entriesOf(g) {
		if !e.fuzzy && e.st == stDead && !e.unconfirmed && e.deadSeen != e.deadExpected {
			m.fatal(e, "%v: dead-lettered by a nack but listed %d times", e, e.deadSeen)
		}
	}
}

// drain consumes until every message of each group is acknowledged or
// dead-lettered, then checks that nothing more arrives and that the
// committed offsets reached the end of every queue.
func (m *model) drain(timeout time.Duration) {
	t := m.rt
	t.Logf("drain")
	m.stats.drains++
	deadline := time.Now().Add(timeout)
	for {
		got := 0
		for g := range mdlGroups {
			if held := m.receiptsOf(g, rcHeld); len(held) > 0 {
				m.ack(g, held)
			}
			msgs := m.pull(g, 8, 50*time.Millisecond, time.Minute)
			got += len(msgs)
			if held := m.receiptsOf(g, rcHeld); len(held) > 0 {
				m.ack(g, held)
			}
		}
		m.check()
		if got == 0 && m.settled() {
			quiet := 0
			for g := range mdlGroups {
				msgs := m.pull(g, 8, 250*time.Millisecond, time.Minute)
				quiet += len(msgs)
				if held := m.receiptsOf(g, rcHeld); len(held) > 0 {
					m.ack(g, held)
				}
			}
			m.check()
			if quiet == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			var open []string
			for g := range mdlGroups {
				for _, e := range m.entriesOf(g) {
					if !e.settled() {
						open = append(open, e.String()+"\n      history: "+e.trace())
					}
				}
			}
			t.Fatalf("drain: not delivered within %v (lost?): %v", timeout, open)
		}
	}
	for g := range mdlGroups {
		prog, err := m.b.Progress(m.ctx, mdlGroups[g])
		if err != nil {
			t.Fatalf("progress: %v", err)
		}
		for _, p := range prog {
			if p.InFlight != 0 || p.Lag != 0 {
				t.Fatalf("after the drain %s %s/%d has %d in flight and lag %d (committed %d of %d)",
					mdlGroups[g], p.Topic, p.QueueID, p.InFlight, p.Lag, p.ConsumerOffset, p.BrokerOffset)
			}
		}
	}
}

func (m *model) settled() bool {
	for g := range mdlGroups {
		for _, e := range m.entriesOf(g) {
			if !e.settled() {
				return false
			}
		}
	}
	return true
}
