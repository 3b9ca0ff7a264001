package peer

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	pb "go.etcd.io/raft/v3/raftpb"
)

// DefaultMaxBodyBytes bounds a batch's body at the handler.
const DefaultMaxBodyBytes = 64 << 20

// HandlerOptions configure Handler.
type HandlerOptions struct {
	// ID is this node's Raft id: a message addressed to another is refused.
	ID uint64
	// Secret, when not empty, must come as "Authorization: Bearer <Secret>"
	// (401 otherwise).
	Secret string
	// MaxBodyBytes (64 MiB) bounds a body (413 above it).
	MaxBodyBytes int64
	// Logger gets the refusals (debug, rate limited).
	Logger zerolog.Logger
}

// Handler serves POST MessagesPath: it checks the secret, then serves a
// stream (StreamContentType: serveStream) or a batch. A batch's body is
// read (bounded), decoded strictly and each message handed to step
// (Shard.Step, which does not block), then answered 204; a batch that
// does not decode, or holds a message this node must not take (another
// node's, a type replicas do not exchange), is a 400 and nothing of it
// is stepped. Errors are text/plain.
func Handler(step func(*pb.Message), opts HandlerOptions) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	log := opts.Logger.With().Str("component", "peer").Uint64("node", opts.ID).Logger().
		Sample(&zerolog.BurstSampler{Burst: 5, Period: 10 * time.Second})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "only POST", http.StatusMethodNotAllowed)
			return
		}
		if !Authorized(r, opts.Secret) {
			log.Debug().Str("remote", r.RemoteAddr).Msg("raft batch refused: bad or missing peer secret")
			w.Header().Set("WWW-Authenticate", `Bearer realm="mqgate-peer"`)
			http.Error(w, "the peer secret is missing or wrong", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Content-Type") == StreamContentType {
			serveStream(w, r, step, opts, log)
			return
		}
		if r.ContentLength > opts.MaxBodyBytes {
			tooLarge(w, opts.MaxBodyBytes)
			return
		}
		body, err := readBody(w, r, opts.MaxBodyBytes)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				tooLarge(w, opts.MaxBodyBytes)
				return
			}
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		msgs, err := decodeBatch(body, opts.ID)
		if err != nil {
			log.Debug().Err(err).Str("remote", r.RemoteAddr).Msg("raft batch refused")
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, m := range msgs {
			step(m)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// serveStream serves a stream (doc.go, "Streams"): over HTTP/2 only, it
// answers 200 at once, then steps each message as it arrives, until the
// body ends (the sender closed the stream) or a message does not frame,
// decode or pass checkMessage — then it writes why into the response and
// ends it, and the sender opens a new stream. The messages before a bad
// one were stepped. No message may be larger than MaxBodyBytes.
func serveStream(w http.ResponseWriter, r *http.Request, step func(*pb.Message), opts HandlerOptions, log zerolog.Logger) {
	if r.ProtoMajor < 2 {
		http.Error(w, "a stream needs HTTP/2", http.StatusHTTPVersionNotSupported)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	sr := newStreamReader(r.Body, opts.ID, opts.MaxBodyBytes)
	err := sr.header()
	for err == nil {
		var m *pb.Message
		if m, err = sr.next(); err == nil {
			step(m)
		}
	}
	if errors.Is(err, io.EOF) || r.Context().Err() != nil {
		return // the sender ended the stream, or went away
	}
	if errors.Is(err, ErrMalformed) {
		log.Debug().Err(err).Str("remote", r.RemoteAddr).Msg("raft stream refused")
	}
	_, _ = io.WriteString(w, err.Error())
}

func tooLarge(w http.ResponseWriter, limit int64) {
	http.Error(w, fmt.Sprintf("the batch is larger than %d bytes", limit), http.StatusRequestEntityTooLarge)
}

// readBody reads the body, at most limit bytes (an *http.MaxBytesError
// beyond), into one buffer of the announced size when there is one
// (net/http holds a body to its Content-Length).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	if n := r.ContentLength; n >= 0 && n <= limit {
		body := make([]byte, n)
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(rd)
}
