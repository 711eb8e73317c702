// Package memory is the embedded worker-state store: all state in this
// process, every operation atomic under one mutex. It is the default for a
// single replica and the local fallback of state/failover, and implements
// state.Store with the Redis scripts' semantics; state/storetest checks
// both.
package memory
