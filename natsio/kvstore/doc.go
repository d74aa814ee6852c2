// Package kvstore is the JetStream key-value worker-ID store: [NewAssigner]
// hands out worker IDs in both modes of package workerid from one bucket
// on the dispenser's NATS server, disposable from a compare-and-set
// counter and leased through workerid's lease machinery, one key per
// worker ID written only with revision checks. It needs nothing beyond
// nats-server 2.9 (no per-key TTL). Its sibling on MySQL is
// [github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore].
package kvstore
