package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	mqgate "github.com/mqgate/mqgate/clients/go"
)

// clusterCmd is the cluster's state as one node sees it (mqadmin's
// clusterList for a Raft group: DLedger's roles, term and indexes).
type clusterCmd struct {
	adminFlags `embed:""`

	Status clusterStatusCmd `cmd:"" help:"This node's view of its cluster: its id and role, the leader, term, commit and applied index, every replica (match index and lag on the leader). The node of --server answers itself; a single node is standalone."`

	AddLearner clusterAddLearnerCmd `cmd:"" name:"add-learner" help:"Add a replica (started empty with --join) as a learner: it receives the log without voting. Promote it once its match index reaches the commit index."`
	Promote    clusterPromoteCmd    `cmd:"" help:"Make a learner a voter."`
	Remove     clusterRemoveCmd     `cmd:"" help:"Remove a replica, e.g. one whose disk died. Removing the leader hands its role to another voter first; the command retries until the new leader has removed it."`
}

type clusterAddLearnerCmd struct {
	ID      int64  `arg:"" name:"id" help:"The new replica's id (unused in the cluster so far)."`
	Address string `arg:"" name:"address" help:"The host:port of the new replica's peer port."`
}

func (c clusterAddLearnerCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.AddLearnerWithResponse(ctx, mqgate.AddLearnerJSONRequestBody{Id: c.ID, Address: c.Address}))
	if err != nil {
		return err
	}
	return a.out.print(res.Body, func(t *table) { clusterTable(t, res.JSON200) })
}

type clusterPromoteCmd struct {
	ID   int           `arg:"" name:"id" help:"The learner's id."`
	Wait time.Duration `help:"While the learner is still catching up (409 learner-behind) or there is no leader, ask again for up to this long (0: ask once)." default:"0s"`
}

func (c clusterPromoteCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, c.Wait)
	defer cancel()
	codes := []string{}
	if c.Wait > 0 {
		codes = []string{"learner-behind", "no-leader"}
	}
	return retrying(ctx, codes, func() error {
		res, err := apiCall(a.c.PromoteMemberWithResponse(ctx, c.ID))
		if err != nil {
			return err
		}
		return a.out.print(res.Body, func(t *table) { clusterTable(t, res.JSON200) })
	})
}

type clusterRemoveCmd struct {
	ID int `arg:"" name:"id" help:"The replica's id."`
}

// Run removes the replica; while its leader hands its role over (503
// no-leader) it asks again, up to the command's timeout.
func (c clusterRemoveCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	return retrying(ctx, []string{"no-leader"}, func() error {
		res, err := apiCall(a.c.RemoveMemberWithResponse(ctx, c.ID))
		if err != nil {
			return err
		}
		return a.out.print(res.Body, func(t *table) { clusterTable(t, res.JSON200) })
	})
}

// retrying calls call until it returns anything but an API error with one
// of codes, or ctx ends (the last error is returned).
func retrying(ctx context.Context, codes []string, call func() error) error {
	for {
		err := call()
		var ce cliError
		if err == nil || !errors.As(err, &ce) || !slices.Contains(codes, ce.e.Code) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

type clusterStatusCmd struct{}

func (clusterStatusCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetClusterWithResponse(ctx))
	if err != nil {
		return err
	}
	s := res.JSON200
	return a.out.print(res.Body, func(t *table) { clusterTable(t, s) })
}

// clusterTable is the view as one table: the node's state as key/value
// rows, then, after a blank row, its replicas under a header of their
// own. A single node has only the first part and says so.
func clusterTable(t *table, s *mqgate.Cluster) {
	if s.Role == mqgate.ClusterRoleStandalone {
		t.kv("role", string(s.Role))
		t.kv("replicas", "none: a single node, started without --node-id and --peers")
		return
	}
	addresses := map[int64]string{}
	for _, p := range s.Peers {
		addresses[p.Id] = p.Address
	}
	t.kv("nodeId", s.NodeId)
	t.kv("role", string(s.Role))
	switch {
	case s.Leader == nil:
		t.kv("leader", "none (an election is under way)")
	case *s.Leader == s.NodeId:
		t.kv("leader", fmt.Sprintf("%d (this node)", *s.Leader))
	default:
		t.kv("leader", fmt.Sprintf("%d (%s)", *s.Leader, addresses[*s.Leader]))
	}
	t.kv("serving", s.Serving)
	t.kv("term", s.Term)
	t.kv("commitIndex", s.CommitIndex)
	t.kv("appliedIndex", s.AppliedIndex)
	t.row()
	t.row("ID", "ADDRESS", "ROLE", "MATCH-INDEX", "LAG-BYTES", "THIS-NODE")
	// Match index and lag are the leader's knowledge: the API leaves
	// them out elsewhere, and "-" says unknown, not zero (on the leader a
	// zero is left out too, and is a zero).
	known := s.Role == mqgate.ClusterRoleLeader
	for _, p := range s.Peers {
		match, lag := "-", "-"
		if known {
			match, lag = cell(deref(p.MatchIndex)), cell(deref(p.LagBytes))
		}
		self := ""
		if p.Id == s.NodeId {
			self = "yes"
		}
		role := string(p.Role)
		if deref(p.NeedsRebuild) {
			role += ", needs rebuild" // retention deleted what it lacks: mqgate replica rebuild
		}
		t.row(cell(p.Id), p.Address, role, match, lag, self)
	}
}

// deref is *p, or zero for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
