package clustercheck

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// maxExamples bounds the examples a Report keeps of each anomaly.
const maxExamples = 10

// Report is what Check found. Counts of messages count distinct bodies;
// counts of requests count operations.
type Report struct {
	SendRequests, SendRequestsOK, SendRequestsFail, SendRequestsInfo int
	// Sends counts the bodies sent; SendsOK those with an ok send,
	// SendsFail those whose every attempt failed, SendsInfo the rest (the
	// outcome is unknown).
	Sends, SendsOK, SendsFail, SendsInfo int

	Pulls, PullsOK, PullsFail, PullsInfo int
	Deliveries                           int // messages in ok pulls
	AcksOK, AcksFail, AcksInfo           int // per receipt
	NacksOK, NacksFail, NacksInfo        int // per receipt

	Groups []GroupReport // by name

	Lost                int // the groups' LostNever + LostUnsettled
	Unexpected          int // deliveries
	IllegalDuplicates   int // deliveries
	InconsistentOffsets int
	// OrderViolations counts pairs of messages of one sharding key, the
	// first sent ok before the second was sent (or before it in one
	// batch), that the log holds on different queues or out of order.
	OrderViolations int
	Duplicates      Duplicates // legitimate, over all groups

	Unavailability []Window // one per fault, in time order
	// UnavailableP50, P99 and Max summarise Unavailability.
	UnavailableP50, UnavailableP99, UnavailableMax time.Duration

	// Examples are a few instances of each anomaly, for the reader.
	Examples map[string][]string
}

// GroupReport is one group's share of a Report.
type GroupReport struct {
	Group      string
	Deliveries int // messages delivered, duplicates included
	Delivered  int // distinct bodies delivered
	Settled    int // distinct bodies acked ok or with an unknown outcome
	// LostNever counts bodies sent ok that the group never got;
	// LostUnsettled those it got but never settled.
	LostNever, LostUnsettled int
	IllegalDuplicates        int
	Duplicates               Duplicates
}

// Duplicates counts deliveries of a body a group had got before, by what
// became of the previous delivery.
type Duplicates struct {
	Nack        int // it was nacked (ok or unknown outcome)
	LeaseExpiry int // its lease had ended when the new pull answered
	UnknownAck  int // its ack's outcome was unknown
	Other       int // none of these: delivered again within the lease
}

// Total is the sum of the causes.
func (d Duplicates) Total() int { return d.Nack + d.LeaseExpiry + d.UnknownAck + d.Other }

func (d *Duplicates) add(o Duplicates) {
	d.Nack += o.Nack
	d.LeaseExpiry += o.LeaseExpiry
	d.UnknownAck += o.UnknownAck
	d.Other += o.Other
}

// Window is the write unavailability after one fault: from the fault to
// the end of the first ok send invoked at or after it.
type Window struct {
	Fault     Fault
	Duration  time.Duration
	Recovered bool // false: no ok send followed; Duration runs to the history's end
}

// OK reports whether the history shows none of the anomalies a gateway
// must never show: a lost or unexpected message, an illegal duplicate, an
// inconsistent offset.
func (r Report) OK() bool {
	return r.Lost == 0 && r.Unexpected == 0 && r.IllegalDuplicates == 0 && r.InconsistentOffsets == 0 && r.OrderViolations == 0
}

// op is an operation: its invoke and its completion (Info with the
// invoke's time when the history has none: the client never learned).
type op struct {
	invoke, done Event
}

// delivery is one message of an ok pull.
type delivery struct {
	group      string
	msg        Message
	start, end time.Time // the pull's
	node       string
}

// settle is one receipt's ack or nack.
type settle struct {
	outcome Type // OK, Fail or Info for this receipt
	end     time.Time
}

// position names where a copy is stored.
type position struct {
	topic  string
	queue  int32
	offset int64
}

func (p position) String() string { return fmt.Sprintf("%s/%d@%d", p.topic, p.queue, p.offset) }

// checker holds Check's indexes.
type checker struct {
	r          *Report
	sendBodies map[string]*sendState
	deliveries map[string]map[string][]*delivery // group → body → deliveries, by pull start
	groups     map[string]bool
	acks       map[string]map[string][]settle // group → body → acks
	nacked     map[string]bool                // receipts nacked ok or unknown
	ackInfo    map[string]bool                // receipts acked with an unknown outcome
	lastEvent  time.Time
}

type sendState struct {
	ok, info bool
	// positions are the distinct places the body's original was stored
	// at: from ok send results and from deliveries of the original.
	positions map[position]string // → message id
}

// Check analyses a history (doc.go, "The analyses").
func Check(h *History) Report {
	r := &Report{Examples: map[string][]string{}}
	c := &checker{
		r:          r,
		sendBodies: map[string]*sendState{},
		deliveries: map[string]map[string][]*delivery{},
		groups:     map[string]bool{},
		acks:       map[string]map[string][]settle{},
		nacked:     map[string]bool{},
		ackInfo:    map[string]bool{},
	}
	ops := pair(h.Events())
	for _, o := range ops {
		c.lastEvent = maxTime(c.lastEvent, o.done.End, o.invoke.Start)
	}
	// Sends first: a long poll invoked before a send may answer its
	// message.
	for _, o := range ops {
		if o.invoke.Kind == Send {
			c.send(o)
		}
	}
	for _, o := range ops {
		switch o.invoke.Kind {
		case Pull:
			c.pull(o)
		case Ack, Nack:
			c.settle(o)
		}
	}
	for _, s := range c.sendBodies {
		switch {
		case s.ok:
			r.SendsOK++
		case s.info:
			r.SendsInfo++
		default:
			r.SendsFail++
		}
	}
	c.offsets()
	c.keyOrder(ops)
	for _, g := range sortedKeys(c.groups) {
		gr := c.group(g)
		r.Groups = append(r.Groups, gr)
		r.Lost += gr.LostNever + gr.LostUnsettled
		r.IllegalDuplicates += gr.IllegalDuplicates
		r.Duplicates.add(gr.Duplicates)
	}
	c.unavailability(ops, h.Faults())
	return *r
}

// pair joins each invoke with its completion, in invoke order.
func pair(events []Event) []op {
	byID := map[int64]*op{}
	var order []int64
	for _, ev := range events {
		o := byID[ev.ID]
		if o == nil {
			o = &op{}
			byID[ev.ID] = o
			order = append(order, ev.ID)
		}
		if ev.Type == Invoke {
			o.invoke = ev
		} else {
			o.done = ev
		}
	}
	out := make([]op, 0, len(order))
	for _, id := range order {
		o := byID[id]
		if o.invoke.Type == "" { // a completion alone: its fields say enough
			o.invoke = o.done
			o.invoke.Type = Invoke
		}
		if o.done.Type == "" {
			o.done = o.invoke
			o.done.Type, o.done.End = Info, o.invoke.Start
		}
		out = append(out, *o)
	}
	slices.SortStableFunc(out, func(a, b op) int { return a.invoke.Start.Compare(b.invoke.Start) })
	return out
}

func (c *checker) example(kind, format string, args ...any) {
	if len(c.r.Examples[kind]) < maxExamples {
		c.r.Examples[kind] = append(c.r.Examples[kind], fmt.Sprintf(format, args...))
	}
}

func (c *checker) send(o op) {
	c.r.SendRequests++
	for _, m := range o.invoke.Messages {
		if c.sendBodies[m.Body] == nil {
			c.sendBodies[m.Body] = &sendState{positions: map[position]string{}}
			c.r.Sends++
		}
	}
	switch o.done.Type {
	case OK:
		c.r.SendRequestsOK++
		for i, m := range o.invoke.Messages {
			s := c.sendBodies[m.Body]
			s.ok = true
			if i < len(o.done.Messages) {
				res := o.done.Messages[i]
				s.positions[position{o.invoke.Topic, res.QueueID, res.QueueOffset}] = res.MessageID
			}
		}
	case Fail:
		c.r.SendRequestsFail++
	default:
		c.r.SendRequestsInfo++
		for _, m := range o.invoke.Messages {
			c.sendBodies[m.Body].info = true
		}
	}
}

// keyOrder checks the order of each sharding key's messages: within an
// ok send, in batch order; between two ok sends of the key, the first
// ended before the second was invoked, every message of the first before
// every message of the second — on the same queue, at a smaller offset.
// Sends whose outcome is unknown are passed over (they may lie anywhere).
func (c *checker) keyOrder(ops []op) {
	type sent struct {
		start, end time.Time
		msgs       []Message
	}
	byKey := map[string][]sent{}
	for _, o := range ops {
		if o.invoke.Kind != Send || o.done.Type != OK {
			continue
		}
		var keyed []Message
		for _, m := range o.done.Messages {
			if m.ShardingKey != "" {
				keyed = append(keyed, m)
			}
		}
		for i := 1; i < len(keyed); i++ {
			c.orderPair(keyed[i-1], keyed[i], "in one batch")
		}
		if len(keyed) > 0 && keyed[0].ShardingKey == keyed[len(keyed)-1].ShardingKey {
			k := keyed[0].ShardingKey
			byKey[k] = append(byKey[k], sent{o.invoke.Start, o.done.End, keyed})
		}
	}
	for _, k := range sortedKeys(byKey) {
		sends := byKey[k]
		slices.SortStableFunc(sends, func(a, b sent) int { return a.start.Compare(b.start) })
		for i := 1; i < len(sends); i++ {
			a, b := sends[i-1], sends[i]
			if !b.start.Before(a.end) { // a ended before (or as) b was invoked
				c.orderPair(a.msgs[len(a.msgs)-1], b.msgs[0], "sent after it")
			}
		}
	}
}

// orderPair counts a violation unless a (of b's key) is stored before b
// on the same queue.
func (c *checker) orderPair(a, b Message, how string) {
	if a.ShardingKey != b.ShardingKey {
		return
	}
	if a.QueueID == b.QueueID && a.QueueOffset < b.QueueOffset {
		return
	}
	c.r.OrderViolations++
	c.example("per-key order", "key %s: %s at queue %d offset %d, then %s (%s) at queue %d offset %d",
		a.ShardingKey, a.Body, a.QueueID, a.QueueOffset, b.Body, how, b.QueueID, b.QueueOffset)
}

func (c *checker) pull(o op) {
	g := o.invoke.Group
	c.groups[g] = true
	c.r.Pulls++
	switch o.done.Type {
	case OK:
		c.r.PullsOK++
	case Fail:
		c.r.PullsFail++
		return
	default:
		c.r.PullsInfo++
		return
	}
	if c.deliveries[g] == nil {
		c.deliveries[g] = map[string][]*delivery{}
	}
	for _, m := range o.done.Messages {
		c.r.Deliveries++
		d := &delivery{group: g, msg: m, start: o.invoke.Start, end: o.done.End, node: o.invoke.Node}
		c.deliveries[g][m.Body] = append(c.deliveries[g][m.Body], d)
		s := c.sendBodies[m.Body]
		if s == nil || (!s.ok && !s.info) {
			c.r.Unexpected++
			why := "never sent"
			if s != nil {
				why = "its every send failed"
			}
			c.example("unexpected", "%q delivered to %s by %s at %s (%s)", m.Body, g, o.invoke.Node, stamp(o.done.End), why)
		}
	}
}

func (c *checker) settle(o op) {
	g := o.invoke.Group
	c.groups[g] = true
	for i, m := range o.invoke.Messages {
		outcome := o.done.Type
		if outcome == OK {
			outcome = Fail // a receipt without an answer, or not "ok"
			if i < len(o.done.Messages) && o.done.Messages[i].Status == "ok" {
				outcome = OK
			}
		}
		if outcome != OK && outcome != Fail {
			outcome = Info
		}
		s := settle{outcome: outcome, end: o.done.End}
		if o.invoke.Kind == Nack {
			switch outcome {
			case OK:
				c.r.NacksOK++
			case Fail:
				c.r.NacksFail++
			default:
				c.r.NacksInfo++
			}
			if outcome != Fail {
				c.nacked[m.Receipt] = true
			}
			continue
		}
		switch outcome {
		case OK:
			c.r.AcksOK++
		case Fail:
			c.r.AcksFail++
		default:
			c.r.AcksInfo++
			c.ackInfo[m.Receipt] = true
		}
		if c.acks[g] == nil {
			c.acks[g] = map[string][]settle{}
		}
		c.acks[g][m.Body] = append(c.acks[g][m.Body], s)
	}
}

// offsets checks that every position holds one body, every message id
// names one body, and every body's original is stored at one position,
// the one its send returned.
func (c *checker) offsets() {
	atPos := map[position]string{}
	atID := map[string]string{}
	claim := func(p position, id, body, how string) {
		if prev, ok := atPos[p]; ok && prev != body {
			c.r.InconsistentOffsets++
			c.example("inconsistent", "%s holds %q and %q (%s)", p, prev, body, how)
		}
		atPos[p] = body
		if id == "" {
			return
		}
		if prev, ok := atID[id]; ok && prev != body {
			c.r.InconsistentOffsets++
			c.example("inconsistent", "message id %s names %q and %q (%s)", id, prev, body, how)
		}
		atID[id] = body
	}
	for _, body := range sortedKeys(c.sendBodies) {
		for p, id := range c.sendBodies[body].positions {
			claim(p, id, body, "send result")
		}
	}
	for _, g := range sortedKeys(c.deliveries) {
		for _, body := range sortedKeys(c.deliveries[g]) {
			s := c.sendBodies[body]
			for _, d := range c.deliveries[g][body] {
				m := d.msg
				if m.OriginID == "" {
					p := position{m.Topic, m.QueueID, m.QueueOffset}
					claim(p, m.MessageID, body, "delivered to "+g)
					if s != nil {
						if _, seen := s.positions[p]; !seen {
							s.positions[p] = m.MessageID
						}
					}
					continue
				}
				claim(position{"%RETRY%" + g, m.QueueID, m.QueueOffset}, m.MessageID, body, "retry copy delivered to "+g)
				if s != nil && len(s.positions) > 0 && !originOf(s, m.OriginID) {
					c.r.InconsistentOffsets++
					c.example("inconsistent", "a retry copy of %q names origin %s, not the id its original was stored under", body, m.OriginID)
				}
			}
		}
	}
	for _, body := range sortedKeys(c.sendBodies) {
		if ps := c.sendBodies[body].positions; len(ps) > 1 {
			c.r.InconsistentOffsets++
			var where []string
			for p, id := range ps {
				where = append(where, p.String()+" "+id)
			}
			slices.Sort(where)
			c.example("inconsistent", "%q stored at %d places: %s", body, len(ps), strings.Join(where, ", "))
		}
	}
}

func originOf(s *sendState, id string) bool {
	for _, known := range s.positions {
		if known == id {
			return true
		}
	}
	return false
}

// group runs the per-group analyses: lost, duplicates legal and illegal.
func (c *checker) group(g string) GroupReport {
	gr := GroupReport{Group: g}
	byBody := c.deliveries[g]
	for _, body := range sortedKeys(byBody) {
		ds := byBody[body]
		slices.SortStableFunc(ds, func(a, b *delivery) int { return a.start.Compare(b.start) })
		gr.Deliveries += len(ds)
		gr.Delivered++
		var ackedAt time.Time // the first ok ack's end
		for _, a := range c.acks[g][body] {
			if a.outcome == OK && (ackedAt.IsZero() || a.end.Before(ackedAt)) {
				ackedAt = a.end
			}
		}
		for i, d := range ds {
			if !ackedAt.IsZero() && d.start.After(ackedAt) {
				gr.IllegalDuplicates++
				c.example("illegal duplicate", "%q delivered to %s by %s, pull invoked %s, %v after an ok ack",
					body, g, d.node, stamp(d.start), d.start.Sub(ackedAt).Round(time.Millisecond))
				continue
			}
			if i == 0 {
				continue
			}
			prev := ds[i-1]
			switch {
			case c.nacked[prev.msg.Receipt]:
				gr.Duplicates.Nack++
			case c.ackInfo[prev.msg.Receipt]:
				gr.Duplicates.UnknownAck++
			case !prev.msg.LeaseUntil.IsZero() && !d.end.Before(prev.msg.LeaseUntil):
				gr.Duplicates.LeaseExpiry++
			default:
				gr.Duplicates.Other++
				c.example("early redelivery", "%q delivered to %s again at %s, its lease ran to %s",
					body, g, stamp(d.end), stamp(prev.msg.LeaseUntil))
			}
		}
	}
	for _, acks := range c.acks[g] {
		if slices.ContainsFunc(acks, func(a settle) bool { return a.outcome != Fail }) {
			gr.Settled++
		}
	}
	for _, body := range sortedKeys(c.sendBodies) {
		if !c.sendBodies[body].ok {
			continue
		}
		if len(byBody[body]) == 0 {
			gr.LostNever++
			c.example("lost", "%q sent ok, never delivered to %s", body, g)
			continue
		}
		if !slices.ContainsFunc(c.acks[g][body], func(a settle) bool { return a.outcome != Fail }) {
			gr.LostUnsettled++
			c.example("lost", "%q delivered to %s %d times, never acked (last lease to %s)",
				body, g, len(byBody[body]), stamp(byBody[body][len(byBody[body])-1].msg.LeaseUntil))
		}
	}
	return gr
}

// unavailability measures, for each fault, the time to the first ok send
// invoked at or after it.
func (c *checker) unavailability(ops []op, faults []Fault) {
	var oks []op
	for _, o := range ops {
		if o.invoke.Kind == Send && o.done.Type == OK {
			oks = append(oks, o)
		}
	}
	slices.SortFunc(faults, func(a, b Fault) int { return a.Time.Compare(b.Time) })
	var ds []time.Duration
	for _, f := range faults {
		w := Window{Fault: f, Duration: c.lastEvent.Sub(f.Time)}
		for _, o := range oks {
			if o.invoke.Start.Before(f.Time) {
				continue
			}
			if d := o.done.End.Sub(f.Time); !w.Recovered || d < w.Duration {
				w.Duration, w.Recovered = d, true
			}
		}
		w.Duration = max(w.Duration, 0)
		c.r.Unavailability = append(c.r.Unavailability, w)
		ds = append(ds, w.Duration)
	}
	slices.Sort(ds)
	c.r.UnavailableP50 = quantile(ds, 0.50)
	c.r.UnavailableP99 = quantile(ds, 0.99)
	if len(ds) > 0 {
		c.r.UnavailableMax = ds[len(ds)-1]
	}
}

// quantile is the nearest-rank q-quantile of sorted ds (0 for none).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(float64(len(ds))*q+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// String prints the report as a table, then the examples.
func (r Report) String() string {
	var b strings.Builder
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "clustercheck: %s\n", verdict)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\ttotal\tok\tfail\tinfo\n")
	fmt.Fprintf(w, "send requests\t%d\t%d\t%d\t%d\n", r.SendRequests, r.SendRequestsOK, r.SendRequestsFail, r.SendRequestsInfo)
	fmt.Fprintf(w, "messages sent\t%d\t%d\t%d\t%d\n", r.Sends, r.SendsOK, r.SendsFail, r.SendsInfo)
	fmt.Fprintf(w, "pulls\t%d\t%d\t%d\t%d\n", r.Pulls, r.PullsOK, r.PullsFail, r.PullsInfo)
	fmt.Fprintf(w, "acks\t%d\t%d\t%d\t%d\n", r.AcksOK+r.AcksFail+r.AcksInfo, r.AcksOK, r.AcksFail, r.AcksInfo)
	fmt.Fprintf(w, "nacks\t%d\t%d\t%d\t%d\n", r.NacksOK+r.NacksFail+r.NacksInfo, r.NacksOK, r.NacksFail, r.NacksInfo)
	_ = w.Flush()
	b.WriteString("\n")
	w = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "group\tdeliveries\tdistinct\tsettled\tlost never\tlost unsettled\tillegal dup\tdup nack\tdup lease\tdup unknown ack\tdup other\n")
	for _, g := range r.Groups {
		d := g.Duplicates
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", g.Group, g.Deliveries, g.Delivered, g.Settled,
			g.LostNever, g.LostUnsettled, g.IllegalDuplicates, d.Nack, d.LeaseExpiry, d.UnknownAck, d.Other)
	}
	_ = w.Flush()
	b.WriteString("\n")
	w = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "lost\t%d\n", r.Lost)
	fmt.Fprintf(w, "unexpected\t%d\n", r.Unexpected)
	fmt.Fprintf(w, "illegal duplicates\t%d\n", r.IllegalDuplicates)
	fmt.Fprintf(w, "inconsistent offsets\t%d\n", r.InconsistentOffsets)
	fmt.Fprintf(w, "per-key order violations\t%d\n", r.OrderViolations)
	fmt.Fprintf(w, "legitimate duplicates\t%d\t(nack %d, lease expiry %d, unknown ack %d, other %d)\n", r.Duplicates.Total(),
		r.Duplicates.Nack, r.Duplicates.LeaseExpiry, r.Duplicates.UnknownAck, r.Duplicates.Other)
	if len(r.Unavailability) > 0 {
		fmt.Fprintf(w, "write unavailability\tp50 %v\tp99 %v\tmax %v\t(%d faults)\n", r.UnavailableP50.Round(time.Millisecond),
			r.UnavailableP99.Round(time.Millisecond), r.UnavailableMax.Round(time.Millisecond), len(r.Unavailability))
	}
	_ = w.Flush()
	for _, u := range r.Unavailability {
		note := ""
		if !u.Recovered {
			note = " (no ok send after it)"
		}
		fmt.Fprintf(&b, "  %s at %s: %v%s\n", u.Fault.Name, stamp(u.Fault.Time), u.Duration.Round(time.Millisecond), note)
	}
	for _, kind := range sortedKeys(r.Examples) {
		fmt.Fprintf(&b, "%s:\n", kind)
		for _, e := range r.Examples[kind] {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	return b.String()
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

func maxTime(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
