package broker

import (
	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/server/broker/txn"
)

// TimerRecovery is how the timer index was opened (tests).
type TimerRecovery = timer.Recovery

// TimerRecovered reports how the timer index was opened.
func (b *Broker) TimerRecovered() TimerRecovery { return b.timers.Recovered() }

// TimerIndexStats reports the timer index's size.
func (b *Broker) TimerIndexStats() timerindex.Stats { return b.timers.IndexStats() }

// TxnRecovery is how the transaction state was opened (tests).
type TxnRecovery = txn.Recovery

// TxnRecovered reports how the transaction state was opened.
func (b *Broker) TxnRecovered() TxnRecovery { return b.txns.Recovered() }

// TxnSnapshotFile is the transaction snapshot's name under <data>/config.
const TxnSnapshotFile = txnSnapshotFile

// LeaseRecovery is what an open restored of the leases.
type LeaseRecovery = leaselog.Recovery

// LeasesRecovered reports what the last open restored.
func (b *Broker) LeasesRecovered() LeaseRecovery { return b.leases.Recovered() }

// PauseRetention stops retention passes until ResumeRetention.
func (b *Broker) PauseRetention() { b.store.PauseRetention() }

// ResumeRetention lets retention passes run again.
func (b *Broker) ResumeRetention() { b.store.SetRetentionPolicy(retentionPolicy{b: b}) }
