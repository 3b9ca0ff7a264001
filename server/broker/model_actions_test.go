package broker_test

// The model-based test of the broker (model_test.go): its actions —
// sends, pulls, acks, nacks, the passing of time — and how each answer
// is judged against the model.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/mqgate/mqgate/server/broker"
)

func (m *model) send(t *rapid.T, batch bool) {
	var sends [][]broker.SendMessage
	if batch {
		sends = append(sends, make([]broker.SendMessage, rapid.IntRange(2, 6).Draw(t, "batch")))
	} else {
		for range rapid.IntRange(1, 3).Draw(t, "sends") {
			sends = append(sends, make([]broker.SendMessage, 1))
		}
	}
	var names []string
	for _, msgs := range sends {
		for i := range msgs {
			name := fmt.Sprintf("m%03d", len(m.bodies)+i)
			msgs[i] = broker.SendMessage{Body: []byte(name + "|" + strings.Repeat("x", rapid.IntRange(0, 400).Draw(t, "pad")))}
			if rapid.IntRange(0, 2).Draw(t, "dedup") == 0 {
				msgs[i].DedupID = "d-" + name
			}
		}
		res, err := m.b.Send(m.ctx, mdlTopic, msgs)
		if err != nil {
			t.Fatalf("send of %d: %v", len(msgs), err)
		}
		if len(res) != len(msgs) {
			t.Fatalf("send of %d returned %d results", len(msgs), len(res))
		}
		for i, r := range res {
			body := string(msgs[i].Body)
			if r.Duplicate {
				t.Fatalf("fresh message %.4s reported as duplicate", body)
			}
			if _, dup := m.byID[r.MessageID]; dup || len(r.MessageID) != 32 {
				t.Fatalf("send returned a reused or bad message id %q", r.MessageID)
			}
			m.ids[body], m.byID[r.MessageID] = r.MessageID, body
			m.bodies = append(m.bodies, body)
			m.sentEpoch[body] = m.epoch
			if msgs[i].DedupID != "" {
				m.dedup[body] = msgs[i].DedupID
				m.dedupList = append(m.dedupList, body)
			}
			for g := range mdlGroups {
				e := &entry{g: g, body: body, queue: r.QueueID, qoff: r.QueueOffset, st: stPending, kind: origCopy, inQueue: true}
				m.note(e, "sent q%d@%d", r.QueueID, r.QueueOffset)
				m.ents[g][body] = e
				m.list[g] = append(m.list[g], e)
			}
			names = append(names, fmt.Sprintf("%.4s(q%d@%d%s)", body, r.QueueID, r.QueueOffset, map[bool]string{true: " dedup"}[msgs[i].DedupID != ""]))
			m.stats.sent++
		}
	}
	t.Logf("send batch=%v %v", batch, names)
}

func (m *model) resendDedup(t *rapid.T) {
	cands := m.dedupList
	if m.tolerate {
		// Known bug (TestModelDedupLostAfterCrash): a crash can lose the
		// dedup key of the last message indexed before a checkpoint.
		cands = nil
		for _, body := range m.dedupList {
			if m.sentEpoch[body] == m.epoch {
				cands = append(cands, body)
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	body := rapid.SampledFrom(cands).Draw(t, "dedupBody")
	id := m.dedup[body]
	if rapid.IntRange(0, 3).Draw(t, "otherBody") == 0 {
		_, err := m.b.Send(m.ctx, mdlTopic, []broker.SendMessage{{Body: []byte(body + "-changed"), DedupID: id}})
		t.Logf("resend dedup %s with another body -> %v", id, err)
		if !errors.Is(err, broker.ErrIdempotencyKeyReused) {
			t.Fatalf("same dedup id, other body: got %v, want ErrIdempotencyKeyReused", err)
		}
		return
	}
	res, err := m.b.Send(m.ctx, mdlTopic, []broker.SendMessage{{Body: []byte(body), DedupID: id}})
	if err != nil {
		t.Fatalf("re-send of dedup id %s: %v", id, err)
	}
	t.Logf("resend dedup %s -> dup=%v", id, res[0].Duplicate)
	if !res[0].Duplicate || res[0].MessageID != m.ids[body] {
		t.Fatalf("re-send of dedup id %s stored a second message: %+v (first id %s)", id, res[0], m.ids[body])
	}
}

func (m *model) pullAction(t *rapid.T, long bool) {
	g := rapid.IntRange(0, 1).Draw(t, "group")
	max := rapid.IntRange(1, 8).Draw(t, "max")
	wait := rapid.SampledFrom([]time.Duration{0, 0, 20 * time.Millisecond, 50 * time.Millisecond}).Draw(t, "wait")
	inv := time.Minute
	if !long {
		inv = rapid.SampledFrom([]time.Duration{30 * time.Millisecond, 50 * time.Millisecond, 80 * time.Millisecond}).Draw(t, "inv")
	}
	m.pull(g, max, wait, inv)
}

// pull pulls and feeds the result to the model.
func (m *model) pull(g, max int, wait, inv time.Duration) []broker.ReceivedMessage {
	t := m.rt
	t0 := time.Now()
	msgs, err := m.b.Pull(m.ctx, broker.PullRequest{Group: mdlGroups[g], Topic: mdlTopic, MaxMessages: max, Wait: wait, Invisible: inv})
	t1 := time.Now()
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	var names []string
	for _, msg := range msgs {
		names = append(names, fmt.Sprintf("%.4s/r%d", msg.Body, msg.ReconsumeTimes))
	}
	t.Logf("pull %s max=%d wait=%v inv=%v -> %v", mdlGroups[g], max, wait, inv, names)
	if len(msgs) > max {
		t.Fatalf("pull of max %d returned %d", max, len(msgs))
	}
	for _, msg := range msgs {
		m.deliver(g, msg, t0, t1, inv)
	}
	if len(msgs) < max {
		// Every queue (and the retry view) was visited: leases that had
		// surely expired when the pull began were taken and sent back.
		for _, e := range m.entriesOf(g) {
			if !e.fuzzy && e.st == stHeld && !t0.Before(e.cur.to.Add(e.cur.inv)) {
				m.sentBack(e, true)
			}
		}
		if t1.Sub(t0) < 900*time.Millisecond { // its read-your-writes catch-up (1 s) did not time out
			m.stats.readYourWrites++
			m.checkAvailable(g, len(msgs), max)
		}
	}
	return msgs
}

// checkAvailable: a pull that returned k < max messages left nothing
// behind that was available when it began, unless popQueue's bounded reads
// (pullMaxReads per queue, each of at least max-k entries) could have
// stopped before it.
func (m *model) checkAvailable(g, k, max int) {
	budget := pullMaxReads * (max - k)
	candidate := func(e *entry) bool {
		if e.fuzzy {
			return e.mustSeeOrig
		}
		return e.st == stPending && e.inQueue
	}
	for _, e := range m.entriesOf(g) {
		if !candidate(e) {
			continue
		}
		holes := 0
		if e.fuzzy || e.kind == origCopy {
			for _, o := range m.entriesOf(g) {
				if o.queue == e.queue && o.qoff < e.qoff && !(candidate(o) && (o.fuzzy || o.kind == origCopy)) {
					holes++
				}
			}
		} else {
			holes = m.sendBacks[g]
		}
		if holes+k < budget {
			m.fatal(e, "pull of %s returned %d < max %d but left %v behind, which was available (read-your-writes)", mdlGroups[g], k, max, e)
		}
	}
}

func (m *model) deliver(g int, msg broker.ReceivedMessage, t0, t1 time.Time, inv time.Duration) {
	t := m.rt
	body := string(msg.Body)
	id, ok := m.ids[body]
	if !ok {
		t.Fatalf("pull delivered a message that was never sent: %q", body)
	}
	e := m.ents[g][body]
	if msg.Topic != mdlTopic {
		m.fatal(e, "%v delivered with topic %q", e, msg.Topic)
	}
	kind := origCopy
	if msg.OriginMessageID != "" {
		kind = retryCopy
		if msg.OriginMessageID != id || msg.MessageID == id || msg.ReconsumeTimes < 1 {
			m.fatal(e, "%v: retry copy %s has origin %s (want %s), reconsumeTimes %d", e, msg.MessageID, msg.OriginMessageID, id, msg.ReconsumeTimes)
		}
	} else if msg.MessageID != id || msg.ReconsumeTimes != 0 {
		m.fatal(e, "%v: original delivered as id %s (want %s) with reconsumeTimes %d", e, msg.MessageID, id, msg.ReconsumeTimes)
	}
	recon := msg.ReconsumeTimes
	if prev, ok := m.msgRecon[msg.MessageID]; ok && prev != recon {
		m.fatal(e, "%v: message id %s delivered with reconsumeTimes %d, earlier %d", e, msg.MessageID, recon, prev)
	}
	m.msgRecon[msg.MessageID] = recon
	if mx, ok := m.maxRecon[g][id]; ok && recon < mx && !e.fuzzy {
		m.fatal(e, "%v: reconsumeTimes of origin %s went down from %d to %d", e, id, mx, recon)
	}
	m.maxRecon[g][id] = max(m.maxRecon[g][id], recon)
	if _, dup := m.rcs[msg.Receipt]; dup || msg.Receipt == "" {
		m.fatal(e, "%v: delivered with a reused or empty receipt", e)
	}
	m.seq++
	r := &rcpt{id: msg.Receipt, g: g, body: body, msgID: msg.MessageID, kind: kind, recon: recon, from: t0, to: t1, inv: inv, gen: m.gen, seq: m.seq}
	m.rcs[r.id] = r
	m.rcList = append(m.rcList, r)
	m.stats.delivered++
	m.note(e, "delivered %s r%d id ..%s as #%d (inv %v, was %s)", kind, recon, msg.MessageID[24:], r.seq, inv, e.st)
	if e.fuzzy {
		if kind == origCopy {
			e.mustSeeOrig = false
		}
		return
	}
	switch e.st {
	case stPending:
		if kind != e.kind || recon != e.recon {
			m.fatal(e, "%v: delivered as %s r%d", e, kind, recon)
		}
		if kind == retryCopy {
			m.stats.retryTimed++
			if t1.Before(e.notBefore) {
				m.fatal(e, "%v: retry delivered %v before its delay level allows", e, e.notBefore.Sub(t1))
			}
		}
	case stHeld:
		old := e.cur
		if kind != retryCopy || recon != old.recon+1 || old.recon >= mdlRetryMax {
			m.fatal(e, "%v: delivered again as %s r%d while leased (lease not failed)", e, kind, recon)
		}
		m.stats.retryTimed++
		if due := old.from.Add(old.inv + levelDelay(3+int(old.recon))); t1.Before(due) {
			m.fatal(e, "%v: retry delivered %v before lease expiry + delay level", e, due.Sub(t1))
		}
		m.fail(old)
		m.sendBacks[g]++
	case stAcked:
		m.fatal(e, "%v: delivered again after an ok ack", e)
	case stDead:
		m.fatal(e, "%v: a dead-lettered message was delivered", e)
	}
	e.st, e.kind, e.recon, e.cur, e.inQueue, e.unconfirmed = stHeld, kind, recon, r, true, false
	e.retried = e.retried || kind == retryCopy
}

// sentBack: e's lease failed (expiry) and the broker sent it back: a retry
// copy one reconsume higher, or the DLQ after retryMaxTimes.
func (m *model) sentBack(e *entry, inferred bool) {
	r := e.cur
	m.fail(r)
	m.sendBacks[e.g]++
	if e.recon >= mdlRetryMax {
		e.st, e.deadRecon = stDead, e.recon
		e.deadExpected++
	} else {
		e.notBefore = r.from.Add(r.inv + levelDelay(3+int(e.recon)))
		e.st, e.kind, e.inQueue = stPending, retryCopy, false
		e.recon++
	}
	e.unconfirmed, e.cur = inferred, nil
	m.note(e, "sent back (inferred %v) -> %s r%d", inferred, e.st, e.recon)
}

func (m *model) ackAction(t *rapid.T, withStale bool) {
	g := rapid.IntRange(0, 1).Draw(t, "group")
	held := m.receiptsOf(g, rcHeld)
	var picks []*rcpt
	if len(held) > 0 {
		n := rapid.IntRange(1, len(held)).Draw(t, "acks")
		picks = pick(t, held, n)
	}
	if withStale {
		if stale := m.receiptsOf(g, rcStale, rcAcked); len(stale) > 0 {
			picks = append(picks, pick(t, stale, 1)[0])
		}
		if other := m.receiptsOf(1 - g); len(other) > 0 && rapid.IntRange(0, 3).Draw(t, "foreign") == 0 {
			picks = append(picks, pick(t, other, 1)[0])
		}
	}
	if len(picks) == 0 {
		return
	}
	m.ack(g, picks)
}

// pick draws n distinct receipts of rs (by index, for a readable trace).
func pick(t *rapid.T, rs []*rcpt, n int) []*rcpt {
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	perm := rapid.Permutation(idx).Draw(t, "pick")
	out := make([]*rcpt, n)
	for i := range out {
		out[i] = rs[perm[i]]
	}
	return out
}

func (m *model) ack(g int, picks []*rcpt) {
	t := m.rt
	ids := make([]string, len(picks))
	for i, r := range picks {
		ids[i] = r.id
	}
	res, err := m.b.Ack(m.ctx, mdlGroups[g], ids)
	tEnd := time.Now()
	if err != nil {
		t.Fatalf("ack: %v", err)
	}
	if len(res) != len(picks) {
		t.Fatalf("ack of %d returned %d results", len(picks), len(res))
	}
	var log []string
	for i, r := range picks {
		log = append(log, fmt.Sprintf("%.4s/r%d[%s]=%s", r.body, r.recon, [...]string{"held", "acked", "stale"}[r.state], res[i].Status))
	}
	t.Logf("ack %s %v", mdlGroups[g], log)
	for i, r := range picks {
		m.judgeAck(g, r, res[i].Status, tEnd)
	}
}

func (m *model) judgeAck(g int, r *rcpt, st broker.ReceiptStatus, tEnd time.Time) {
	t := m.rt
	if r.g != g {
		if st != broker.ReceiptInvalid {
			t.Fatalf("ack in %s of a receipt of %s answered %s, want invalid", mdlGroups[g], mdlGroups[r.g], st)
		}
		return
	}
	e := m.ents[g][r.body]
	m.note(e, "ack #%d [%s] -> %s", r.seq, [...]string{"held", "acked", "stale"}[r.state], st)
	if st != broker.ReceiptOK && st != broker.ReceiptExpired {
		m.fatal(e, "%v: ack answered %q", e, st)
	}
	switch r.state {
	case rcHeld:
		if st == broker.ReceiptOK {
			if r.liveAt(tEnd) {
				m.stats.liveOK++
				if r.gen != m.gen {
					m.stats.restoredOK++
				}
			}
			r.state = rcAcked
			m.stats.acked++
			if e.fuzzy {
				// A live lease acked: after a crash every held receipt is
				// new; after a reset an older one is a retry-view lease,
				// which the reset left valid.
				e.ackedSinceFuzz = true
				return
			}
			if e.cur != r {
				t.Fatalf("model: %v holds another receipt", e)
			}
			e.st, e.cur = stAcked, nil
			return
		}
		if r.liveAt(tEnd) {
			// Live across restarts too: the lease was restored.
			m.fatal(e, "%v: ack of a live lease (%v left; issued gen %d, now gen %d) answered expired", e, r.from.Add(r.inv).Sub(tEnd), r.gen, m.gen)
		}
		if e.fuzzy {
			m.fail(r)
			return
		}
		m.sentBack(e, true)
	case rcAcked:
		if st != broker.ReceiptOK && !e.fuzzy {
			m.fatal(e, "%v: a repeated ack answered %s, want ok", e, st)
		}
	case rcStale:
		if st != broker.ReceiptOK && !e.fuzzy {
			m.stats.staleExpired++
		}
		if st != broker.ReceiptOK || e.fuzzy || e.st == stAcked {
			return // expired as it should be; or ok for an acknowledged message (harmless)
		}
		if r.gen != m.gen && m.failedCopy[r.msgID] && m.tolerate {
			m.stats.knownBug++
			t.Logf("KNOWN BUG tolerated: stale receipt of %v (its copy was sent back, then a restart) acked ok", e)
			return
		}
		m.fatal(e, "%v: ack of a superseded receipt (its copy sent back: %v; issued gen %d, now gen %d) answered ok, but the message is not acknowledged",
			e, m.failedCopy[r.msgID], r.gen, m.gen)
	}
}

func (m *model) nackAction(t *rapid.T) {
	g := rapid.IntRange(0, 1).Draw(t, "group")
	held := m.receiptsOf(g, rcHeld)
	var picks []*rcpt
	if len(held) > 0 {
		n := rapid.IntRange(1, min(3, len(held))).Draw(t, "nacks")
		picks = pick(t, held, n)
	}
	if stale := m.receiptsOf(g, rcStale, rcAcked); len(stale) > 0 && rapid.IntRange(0, 3).Draw(t, "withStale") == 0 {
		picks = append(picks, pick(t, stale, 1)[0])
	}
	if len(picks) == 0 {
		return
	}
	items := make([]broker.NackItem, len(picks))
	var log []string
	for i, r := range picks {
		items[i] = broker.NackItem{Receipt: r.id, DelayLevel: rapid.SampledFrom([]int{-1, 0, 0, 1, 2, 3, 5}).Draw(t, "level"), Reason: "model"}
		log = append(log, fmt.Sprintf("%.4s/r%d[%s]@%d", r.body, r.recon, [...]string{"held", "acked", "stale"}[r.state], items[i].DelayLevel))
	}
	tStart := time.Now()
	res, err := m.b.Nack(m.ctx, mdlGroups[g], items)
	tEnd := time.Now()
	if err != nil {
		t.Fatalf("nack: %v", err)
	}
	for i := range log {
		log[i] += "=" + string(res[i].Status)
	}
	t.Logf("nack %s %v", mdlGroups[g], log)
	for i, r := range picks {
		m.judgeNack(g, r, items[i].DelayLevel, res[i].Status, tStart, tEnd)
	}
}

func (m *model) judgeNack(g int, r *rcpt, level int, st broker.ReceiptStatus, tStart, tEnd time.Time) {
	t := m.rt
	e := m.ents[g][r.body]
	m.note(e, "nack #%d@%d [%s] -> %s", r.seq, level, [...]string{"held", "acked", "stale"}[r.state], st)
	if r.state != rcHeld {
		if st != broker.ReceiptExpired {
			m.fatal(e, "%v: nack of a receipt no longer held answered %s, want expired", e, st)
		}
		m.stats.staleExpired++
		return
	}
	switch st {
	case broker.ReceiptOK:
		if r.liveAt(tEnd) {
			m.stats.liveOK++
			if r.gen != m.gen {
				m.stats.restoredOK++
			}
		}
		m.stats.nacked++
		m.fail(r)
		if e.fuzzy {
			return
		}
		if e.cur != r {
			t.Fatalf("model: %v holds another receipt", e)
		}
		m.sendBacks[g]++
		if level < 0 || e.recon >= mdlRetryMax {
			e.st, e.deadRecon = stDead, e.recon
			e.deadExpected++
		} else {
			lv := level
			if lv == 0 {
				lv = 3 + int(e.recon)
			}
			e.st, e.kind, e.inQueue, e.notBefore = stPending, retryCopy, false, tStart.Add(levelDelay(lv))
			e.recon++
		}
		e.cur, e.unconfirmed = nil, false
	case broker.ReceiptExpired:
		if r.liveAt(tEnd) {
			m.fatal(e, "%v: nack of a live lease (issued gen %d, now gen %d) answered expired", e, r.gen, m.gen)
		}
		if e.fuzzy {
			m.fail(r)
			return
		}
		m.sentBack(e, true)
	default:
		m.fatal(e, "%v: nack answered %q", e, st)
	}
}

func (m *model) sleep(t *rapid.T) {
	d := time.Duration(rapid.IntRange(10, 60).Draw(t, "ms")) * time.Millisecond
	t.Logf("sleep %v", d)
	time.Sleep(d) // the action itself: time passes (leases expire, retries fall due)
}
