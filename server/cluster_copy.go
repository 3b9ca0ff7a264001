package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/peer"
	"github.com/mqgate/mqgate/storage/raftlog"
	"github.com/mqgate/mqgate/storage/shard"
)

// A replica started with --join on an empty data dir starts from a copy
// of the leader's data (package shard's copies), fetched over the peer
// port before its store opens: the Raft log alone cannot bring it up to
// date once retention deleted the leader's first segments, or when the
// cluster adopted a single node's log. The copy is served by the leader
// (a follower redirects to it: a follower left behind by a retention cut
// would hand out a copy no leader can continue), and a replica rebuilt
// with `mqgate replica rebuild` starts from one the same way.

// maxCopies bounds the copies a leader sends at once (each reads its
// whole log and holds its retention).
const maxCopies = 2

// copyStall is how long a copy may go without a byte before the
// receiver gives it up and asks again.
const copyStall = 30 * time.Second

// serveCopy answers GET peer.CopyPath: a copy of this replica's data
// when it leads, else a redirect to the leader's peer port (503 while
// none is known).
func (n *clusterNode) serveCopy(w http.ResponseWriter, r *http.Request) {
	if !peer.Authorized(r, n.cfg.ClusterSecret) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	st := n.shard.Status()
	if st.Role != "leader" {
		addr, ok := n.peerAddr(st.Leader)
		if st.Leader == 0 || !ok {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "no leader is known: ask again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, n.peerScheme+"://"+addr+peer.CopyPath, http.StatusTemporaryRedirect)
		return
	}
	select {
	case n.copies <- struct{}{}:
		defer func() { <-n.copies }()
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("%d copies are being sent: ask again", maxCopies), http.StatusServiceUnavailable)
		return
	}
	cw := &copyWriter{w: w}
	w.Header().Set("Content-Type", "application/x-tar")
	h, err := n.shard.WriteCopy(r.Context(), cw)
	switch {
	case err != nil && !cw.wrote:
		w.Header().Del("Content-Type")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case err != nil: // the receiver finds the stream without its end
		n.log.Warn().Err(err).Str("to", r.RemoteAddr).Msg("a copy for a replica failed")
	default:
		n.log.Info().Str("to", r.RemoteAddr).Uint64("index", h.Index).Int64("first", h.First).Int64("offset", h.Offset).
			Msg("sent a copy of this replica's data")
	}
}

// copyWriter notes whether the answer has started.
type copyWriter struct {
	w     io.Writer
	wrote bool
}

func (c *copyWriter) Write(b []byte) (int, error) {
	c.wrote = true
	return c.w.Write(b)
}

// fetchCopy builds the data dir of opts from a copy of the leader's data,
// asking the other replicas in turn (a follower redirects to the leader)
// until one answers with a whole copy or ctx ends.
func fetchCopy(ctx context.Context, log zerolog.Logger, client *http.Client, scheme string, self uint64, others map[uint64]string, opts raftlog.Options) error {
	ids := make([]uint64, 0, len(others))
	for id := range others {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return errors.New("--join needs the other replicas in --peers to copy the cluster's data from")
	}
	wait := 200 * time.Millisecond
	for round := 0; ; round++ {
		var errs []string
		for _, id := range ids {
			h, err := fetchCopyFrom(ctx, client, scheme+"://"+others[id]+peer.CopyPath, opts, self)
			if err == nil {
				log.Info().Uint64("from", h.Source).Uint64("index", h.Index).Int64("first", h.First).Int64("offset", h.Offset).
					Msg("started from a copy of the leader's data; the leader sends the rest once this replica is added")
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("copy the cluster's data: %w", ctx.Err())
			}
			if errors.Is(err, shard.ErrCannotReceive) {
				return err
			}
			errs = append(errs, fmt.Sprintf("replica %d: %v", id, err))
		}
		if round%10 == 0 {
			log.Warn().Str("errors", strings.Join(errs, "; ")).Msg("waiting to copy the cluster's data from the leader; asking again")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("copy the cluster's data: %w (%s)", ctx.Err(), strings.Join(errs, "; "))
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// fetchCopyFrom asks url for a copy and builds the data dir from it.
func fetchCopyFrom(ctx context.Context, client *http.Client, url string, opts raftlog.Options, self uint64) (shard.CopyHeader, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return shard.CopyHeader{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return shard.CopyHeader{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return shard.CopyHeader{}, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	body := &stallReader{r: resp.Body, timer: time.AfterFunc(copyStall, func() {
		cancel(fmt.Errorf("no byte of the copy for %s", copyStall))
	})}
	defer body.timer.Stop()
	h, err := shard.ReceiveCopy(ctx, body, opts, self)
	if err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, c)
		}
		return h, err
	}
	return h, nil
}

// stallReader resets timer at every read that returns bytes.
type stallReader struct {
	r     io.Reader
	timer *time.Timer
}

func (s *stallReader) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if n > 0 {
		s.timer.Reset(copyStall)
	}
	return n, err
}
