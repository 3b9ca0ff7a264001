package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
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
} //	@name	ClusterPeer

// registerClusterRoutes registers the cluster view.
func (h *handler) registerClusterRoutes(r chi.Router) {
	// GET /v1/cluster — this node's view of the cluster.
	r.Get("/cluster", h.getCluster)
}

// getCluster reports this node's view of its cluster.
//
//	@Summary		This node's view of the cluster
//	@Description	The node's id and Raft role, the leader (absent while there is none), term, commit and applied index, and every replica with its peer address; on the leader each replica's match index and lag in bytes. Every node answers for itself (this request is never forwarded). A single node answers role `standalone`.
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
