package redis

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/llm-router/llm-router/state"
)

// This file holds the Redis store's queue operations besides the claim:
// cancel, poll, pump, and the notices that wake a replica's waiters.

// Cancel takes a waiter out of its queue (see cancel.lua).
func (r *Store) Cancel(ctx context.Context, id string) (state.WaiterStatus, error) {
	return r.waiterStatus(ctx, scriptCancel, id)
}

// Poll says where a waiter stands (see poll.lua).
func (r *Store) Poll(ctx context.Context, id string) (state.WaiterStatus, error) {
	return r.waiterStatus(ctx, scriptPoll, id)
}

func (r *Store) waiterStatus(ctx context.Context, s *redis.Script, id string) (state.WaiterStatus, error) {
	var res []any
	for _, sh := range r.shardsOfID(ctx, id, "") {
		var err error
		res, err = r.run(ctx, sh, s, id).Slice()
		if err != nil || len(res) == 0 {
			return state.WaiterStatus{}, fmt.Errorf("redis waiter status: %w", err)
		}
		if st, _ := res[0].(string); st != "gone" {
			break
		}
	}
	st, _ := res[0].(string)
	switch st {
	case "removed":
		return state.WaiterStatus{State: state.WaiterRemoved}, nil
	case "queued":
		pos, _ := res[1].(int64)
		return state.WaiterStatus{State: state.WaiterQueued, Position: int(pos)}, nil
	case "granted":
		w, _ := res[1].(string)
		return state.WaiterStatus{State: state.WaiterGranted, Worker: w}, nil
	}
	return state.WaiterStatus{State: state.WaiterGone}, nil
}

// Pump hands free slots to waiters of every model.
func (r *Store) Pump(ctx context.Context) error {
	for _, sh := range r.shards {
		if err := r.run(ctx, sh, scriptPump).Err(); err != nil {
			return fmt.Errorf("redis pump: %w", err)
		}
	}
	return nil
}

// Subscribe delivers notices about replica's waiters to fn, until ctx ends.
// Pub/Sub is at most once; waiters also Poll, so a lost message only
// delays a grant.
func (r *Store) Subscribe(ctx context.Context, replica string, fn func(state.Notice)) error {
	channels := make([]string, len(r.shards))
	for i, sh := range r.shards {
		channels[i] = sh.prefix + "notify:" + replica
	}
	ps := r.client.Subscribe(ctx, channels...)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return fmt.Errorf("redis subscribe: %w", err)
	}
	go func() {
		defer ps.Close()
		ch := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case msg, ok := <-ch:
				if !ok {
					return
				}
				id, worker, _ := strings.Cut(msg.Payload, " ")
				fn(state.Notice{Waiter: id, Worker: worker, Shed: worker == "-"})
			}
		}
	}()
	return nil
}
