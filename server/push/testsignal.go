package push

// TestSignals let tests wait for the dispatcher's events instead of
// sleeping. Each is a no-op until Init is called (before Start).
type TestSignals struct {
	// Delivered gets every finished (settled) delivery.
	Delivered TestSignal[Delivery]
	// Ran gets the result of every runOnce of the Start loop.
	Ran TestSignal[RunResult]
}

// Init makes every signal record.
func (ts *TestSignals) Init() {
	ts.Delivered.init()
	ts.Ran.init()
}

// testSignalBuffer is how many events a signal keeps before it drops new ones.
const testSignalBuffer = 4096

// TestSignal is one event stream for tests; the zero value drops events.
type TestSignal[T any] struct{ ch chan T }

func (s *TestSignal[T]) init() { s.ch = make(chan T, testSignalBuffer) }

// signal records v when the signal is initialised (never blocks).
func (s *TestSignal[T]) signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// C is the stream of events (nil before Init).
func (s *TestSignal[T]) C() <-chan T { return s.ch }
