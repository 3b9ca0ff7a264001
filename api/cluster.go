package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// Cluster is a node's view of its cluster (GET /v1/cluster). A single
// node (no --peers) answers role "standalone" and no peers.
type Cluster struct {
	// NodeID is this node's id in --peers (0 for a single node).
	NodeID uint64 `json:"nodeId" example:"2"`
	// Role is this node's Raft role.
	Role string `json:"role" enums:"leader,follower,candidate,standalone" example:"follower"`
	// Leader is the leader's node id; absent while there is none.
	Leader uint64 `json:"leader,omitempty" example:"1"`
	// Serving: this node leads and has applied its log: it serves the
	// API itself (the others forward to it).
	Serving      bool          `json:"serving" example:"false"`
	Term         uint64        `json:"term" example:"3"`
	CommitIndex  uint64        `json:"commitIndex" example:"1204"`
	AppliedIndex uint64        `json:"appliedIndex" example:"1204"`
	Peers        []ClusterPeer `json:"peers"`
} //	@name	Cluster

// ClusterPeer is one replica of the cluster, this one included.
type ClusterPeer struct {
	ID      uint64 `json:"id" example:"1"`
	Address string `json:"address" example:"127.0.0.1:7101"`
	// Role is the replica's role as this node knows it: leader, follower
	// or learner.
	Role string `json:"role" enums:"leader,follower,learner" example:"leader"`
	// MatchIndex and LagBytes are known on the leader only: the last
	// index in the replica's log and the CommitLog bytes it lacks.
	MatchIndex uint64 `json:"matchIndex,omitempty" example:"1204"`
	LagBytes   int64  `json:"lagBytes,omitempty" example:"0"`
	// NeedsRebuild, known on the leader only: what the replica lacks is
	// no longer in the leader's log (retention deleted it), so it cannot
	// catch up; rebuild it (mqgate replica rebuild, then start it with
	// --join: it starts from a copy of the leader's data).
	NeedsRebuild bool `json:"needsRebuild,omitempty" example:"false"`
} //	@name	ClusterPeer

// registerClusterRoutes registers the cluster view.
func (h *handler) registerClusterRoutes(r chi.Router) {
	// GET /v1/cluster — this node's view of the cluster.
	r.Get("/cluster", h.getCluster)
	h.registerMemberRoutes(r)
}

// getCluster reports this node's view of its cluster.
//
//	@Summary		This node's view of the cluster
//	@Description	The node's id and Raft role, the leader (absent while there is none), term, commit and applied index, and every replica with its peer address; on the leader each replica's match index, lag in bytes, and whether it needs a rebuild (retention deleted what it lacks). Every node answers for itself (this request is never forwarded). A single node answers role `standalone`.
//	@ID				getCluster
//	@Tags			broker
//	@Produce		json
//	@Produce		application/problem+json
//	@Success		200	{object}	Cluster
//	@Failure		503	{object}	Problem	"shutting-down"
//	@Router			/cluster [get]
func (h *handler) getCluster(w http.ResponseWriter, r *http.Request) {
	out := Cluster{Role: "standalone", Peers: []ClusterPeer{}}
	if h.deps.Cluster != nil {
		var err error
		if out, err = h.deps.Cluster(r.Context()); err != nil {
			WriteError(w, r, err)
			return
		}
	}
	writeJSON(w, r, http.StatusOK, out)
}

// ClusterMembers changes the membership of a cluster through Raft, on its
// leader: each call returns once the change is applied.
type ClusterMembers interface {
	AddLearner(ctx context.Context, id uint64, address string) (Cluster, error)
	Promote(ctx context.Context, id uint64) (Cluster, error)
	Remove(ctx context.Context, id uint64) (Cluster, error)
}

// AddLearnerRequest names a new replica: its id (unused in the cluster
// so far) and the host:port of its peer port.
type AddLearnerRequest struct {
	ID      uint64 `json:"id" example:"4" minimum:"1"`
	Address string `json:"address" example:"127.0.0.1:7104" maxLength:"255"`
} //	@name	AddLearnerRequest

// registerMemberRoutes registers the membership changes.
func (h *handler) registerMemberRoutes(r chi.Router) {
	// POST /v1/cluster/learners — add a replica as a learner.
	r.Post("/cluster/learners", h.addLearner)
	// POST /v1/cluster/members/{id}/promote — make a learner a voter.
	r.Post("/cluster/members/{id}/promote", h.promoteMember)
	// DELETE /v1/cluster/members/{id} — remove a replica.
	r.Delete("/cluster/members/{id}", h.removeMember)
}

// addLearner adds a replica as a learner.
//
//	@Summary		Add a replica as a learner
//	@Description	Adds a replica, started empty with `--join`, as a learner: it receives the log but does not vote. Promote it once it caught up (its matchIndex in GET /v1/cluster reaches the leader's). Answered once the change is applied on the leader; the answer is the leader's view of the cluster.
//	@ID				addLearner
//	@Tags			broker
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			request	body		AddLearnerRequest	true	"The new replica"
//	@Success		200		{object}	Cluster
//	@Failure		400		{object}	Problem	"malformed-request"
//	@Failure		409		{object}	Problem	"not-a-cluster, membership-conflict"
//	@Failure		503		{object}	Problem	"no-leader, write-outcome-unknown, shutting-down"
//	@Router			/cluster/learners [post]
func (h *handler) addLearner(w http.ResponseWriter, r *http.Request) {
	var req AddLearnerRequest
	if err := readJSON(r, &req, false); err != nil {
		WriteError(w, r, err)
		return
	}
	if req.ID == 0 {
		WriteError(w, r, fmt.Errorf("%w: id must be above 0", ErrMalformedRequest))
		return
	}
	if len(req.Address) > 255 {
		WriteError(w, r, fmt.Errorf("%w: address longer than 255 bytes", ErrMalformedRequest))
		return
	}
	if _, _, err := net.SplitHostPort(req.Address); err != nil {
		WriteError(w, r, fmt.Errorf("%w: address %s is not host:port", ErrMalformedRequest, broker.QuoteValue(req.Address)))
		return
	}
	h.membership(w, r, func(m ClusterMembers) (Cluster, error) { return m.AddLearner(r.Context(), req.ID, req.Address) })
}

// promoteMember makes a learner a voter.
//
//	@Summary		Promote a learner to a voter
//	@Description	Makes a learner a voter. Answered once the change is applied on the leader. A learner that has not caught up with the leader's log (more than 8 MiB behind its commit point) is refused with 409 learner-behind and Retry-After: a voter that far behind could leave the cluster without a majority able to commit.
//	@ID				promoteMember
//	@Tags			broker
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			id	path		integer	true	"The replica's id"
//	@Success		200	{object}	Cluster
//	@Failure		400	{object}	Problem	"malformed-request"
//	@Failure		409	{object}	Problem	"not-a-cluster, membership-conflict, learner-behind"
//	@Failure		503	{object}	Problem	"no-leader, write-outcome-unknown, shutting-down"
//	@Router			/cluster/members/{id}/promote [post]
func (h *handler) promoteMember(w http.ResponseWriter, r *http.Request) {
	id, err := memberID(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	h.membership(w, r, func(m ClusterMembers) (Cluster, error) { return m.Promote(r.Context(), id) })
}

// removeMember removes a replica.
//
//	@Summary		Remove a replica
//	@Description	Removes a replica (voter or learner) from the cluster, e.g. one whose disk died. Removing the leader first hands its role to another voter: the answer is then 503 no-leader, and the same request, retried, removes it from the new leader.
//	@ID				removeMember
//	@Tags			broker
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			id	path		integer	true	"The replica's id"
//	@Success		200	{object}	Cluster
//	@Failure		400	{object}	Problem	"malformed-request"
//	@Failure		409	{object}	Problem	"not-a-cluster, membership-conflict"
//	@Failure		503	{object}	Problem	"no-leader, write-outcome-unknown, shutting-down"
//	@Router			/cluster/members/{id} [delete]
func (h *handler) removeMember(w http.ResponseWriter, r *http.Request) {
	id, err := memberID(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	h.membership(w, r, func(m ClusterMembers) (Cluster, error) { return m.Remove(r.Context(), id) })
}

func memberID(r *http.Request) (uint64, error) {
	raw := chi.URLParam(r, "id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: replica id %s is not an integer above 0", ErrMalformedRequest, broker.QuoteValue(raw))
	}
	return id, nil
}

func (h *handler) membership(w http.ResponseWriter, r *http.Request, change func(ClusterMembers) (Cluster, error)) {
	if h.deps.Members == nil {
		WriteError(w, r, ErrNotClustered)
		return
	}
	out, err := change(h.deps.Members)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, out)
}
