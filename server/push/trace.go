package push

// PushTracer is what a Broker may also be to trace deliveries: the
// broker's message trace (TracePushed) records each delivery's HTTP
// status and result. A broker without it is not told.
type PushTracer interface {
	// TracePushed notes the outcome of one delivery of the lease of
	// receipt in group; it must not block.
	TracePushed(group, receipt string, status int, result string)
}

// tracePushed tells the broker's message trace of a delivery's outcome
// (not of one given back before a request went out).
func (d *Dispatcher) tracePushed(group, receipt string, a attempt) {
	if a.result == ResultReleased {
		return
	}
	if t, ok := d.broker.(PushTracer); ok {
		t.TracePushed(group, receipt, a.status, a.result)
	}
}
