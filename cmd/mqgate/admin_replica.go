package main

import (
	"context"
	"fmt"
	"os"
	"time"

	mqgate "github.com/mqgate/mqgate/clients/go"
	"github.com/mqgate/mqgate/server"
)

// replicaCmd is what is done on a replica's own machine while its server
// is stopped, against another node of its cluster (--server).
type replicaCmd struct {
	adminFlags `embed:""`

	Rebuild replicaRebuildCmd `cmd:"" help:"Rebuild this stopped replica from the others (a damaged log, a lost disk): its data dir is moved aside and left empty, it is removed from the cluster if it is a voter and added back as a learner at its --peers address. Then start it with --join and promote it once it caught up (mqgate cluster promote ID --wait 10m)."`
}

type replicaRebuildCmd struct {
	DataDir string `help:"This replica's data dir (its server stopped); moved to <dir>.damaged-<UTC time>, kept for a post-mortem." env:"MQGATE_DATA_DIR" default:"${data_dir}"`
	NodeID  uint64 `name:"node-id" help:"This replica's id." env:"MQGATE_NODE_ID" required:""`
	Peers   string `help:"The cluster's replicas as serve takes them (id=host:port of each peer port); this replica's is where the others reach it." env:"MQGATE_PEERS" required:""`
}

// Run checks that --server is another replica of the cluster, moves the
// data dir aside (refused while a server holds it), then changes the
// membership: a voter is removed (its vote would count with an empty
// log) and the replica added as a learner. Each step is skipped when it
// is already done, so the command can be run again after a failure.
func (c replicaRebuildCmd) Run(ctx context.Context, a *admin) error {
	addr, err := server.PeerAddress(c.Peers, c.NodeID)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	view, err := apiCall(a.c.GetClusterWithResponse(ctx))
	if err != nil {
		return err
	}
	switch v := view.JSON200; {
	case v.Role == mqgate.ClusterRoleStandalone:
		return fmt.Errorf("%s runs alone: a replica is rebuilt from the other replicas of its cluster", a.server)
	case uint64(v.NodeId) == c.NodeID:
		return fmt.Errorf("%s is replica %d itself: point --server at another replica of the cluster", a.server, c.NodeID)
	}
	role := ""
	for _, p := range view.JSON200.Peers {
		if uint64(p.Id) == c.NodeID {
			role = string(p.Role)
		}
	}

	aside, err := server.SetReplicaAside(c.DataDir, time.Now())
	if err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if aside != "" {
		say("moved %s aside to %s (kept for a post-mortem; delete it when done)", c.DataDir, aside)
	} else {
		say("%s is empty: nothing to move aside", c.DataDir)
	}
	if role == string(mqgate.ClusterPeerRoleFollower) || role == string(mqgate.ClusterPeerRoleLeader) {
		err := retrying(ctx, []string{"no-leader"}, func() error {
			_, err := apiCall(a.c.RemoveMemberWithResponse(ctx, int(c.NodeID)))
			return err
		})
		if err != nil {
			return fmt.Errorf("removing voter %d: %w", c.NodeID, err)
		}
		say("removed voter %d from the cluster", c.NodeID)
	}
	if role != string(mqgate.ClusterPeerRoleLearner) {
		var res *mqgate.AddLearnerResponse
		err := retrying(ctx, []string{"no-leader"}, func() error {
			var err error
			res, err = apiCall(a.c.AddLearnerWithResponse(ctx, mqgate.AddLearnerJSONRequestBody{Id: int64(c.NodeID), Address: addr}))
			return err
		})
		if err != nil {
			return fmt.Errorf("adding %d back as a learner: %w", c.NodeID, err)
		}
		say("added %d as a learner at %s", c.NodeID, addr)
		view.Body = res.Body
		view.JSON200 = res.JSON200
	} else {
		say("%d is a learner already", c.NodeID)
	}
	say("next: start it with its flags and --join (it receives the log from the leader), then: mqgate cluster promote %d --wait 10m", c.NodeID)
	return a.out.print(view.Body, func(t *table) { clusterTable(t, view.JSON200) })
}
