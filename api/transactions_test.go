package api_test

import (
	"context"
	"time"

	"github.com/mqgate/mqgate/server/broker"
)

// The transaction routes are tested over real HTTP against the real
// broker (server/e2e_transactions_test.go); the fake only satisfies
// api.Broker for the handler tests of the other routes.

func (f *fakeBroker) CommitTransaction(ctx context.Context, id string) (broker.Transaction, error) {
	if err := f.check(); err != nil {
		return broker.Transaction{}, err
	}
	f.record(id)
	return broker.Transaction{ID: id, State: broker.TxnCommitted}, nil
}

func (f *fakeBroker) RollbackTransaction(ctx context.Context, id string) (broker.Transaction, error) {
	if err := f.check(); err != nil {
		return broker.Transaction{}, err
	}
	f.record(id)
	return broker.Transaction{ID: id, State: broker.TxnRolledBack, Reason: broker.TxnReasonProducer}, nil
}

func (f *fakeBroker) GetTransaction(ctx context.Context, id string) (broker.Transaction, error) {
	if err := f.check(); err != nil {
		return broker.Transaction{}, err
	}
	f.record(id)
	return broker.Transaction{ID: id, State: broker.TxnPending}, nil
}

func (f *fakeBroker) PullTransactionChecks(ctx context.Context, group string, limit int, wait time.Duration) ([]broker.TransactionCheck, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.record(group, limit, wait)
	return nil, nil
}
