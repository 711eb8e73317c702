package decisions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llm-router/llm-router/scheduler"
)

// ErrNotFound: no decision is kept for that request id.
var ErrNotFound = errors.New("no decision recorded for that request id")

// Stream keeps decisions in a bounded Redis stream, so any replica can
// explain a request another one decided. Records are buffered and written
// in one pipelined round trip every interval given to Run, never on the
// request path.
type Stream struct {
	client redis.UniversalClient
	key    string
	max    int64
	log    *zap.Logger

	mu      sync.Mutex
	pending []*scheduler.Decision

	// OnFlush, when set, is called once per pipelined write (a round trip).
	OnFlush func(err error)
}

var _ scheduler.Recorder = (*Stream)(nil)

// NewStream writes to the stream {prefix}:decisions, trimmed to about max
// entries (the key shares the store's hash tag).
func NewStream(client redis.UniversalClient, prefix string, max int, log *zap.Logger) *Stream {
	if log == nil {
		log = zap.NewNop()
	}
	return &Stream{client: client, key: prefix + "decisions", max: int64(max), log: log}
}

// Record queues d for the next flush. The queue is bounded: if Redis is
// unreachable for long, the oldest unwritten decisions are dropped (the
// replica's in-memory ring still has them).
func (s *Stream) Record(d *scheduler.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) >= 10000 {
		s.pending = s.pending[1:]
	}
	s.pending = append(s.pending, d)
}

// Run flushes every interval until ctx ends, then once more.
func (s *Stream) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = s.Flush(fctx)
			cancel()
			return
		case <-t.C:
			if err := s.Flush(ctx); err != nil && ctx.Err() == nil {
				s.log.Debug("flush decisions", zap.Error(err))
			}
		}
	}
}

// Flush writes the queued decisions in one pipeline.
func (s *Stream) Flush(ctx context.Context) error {
	s.mu.Lock()
	batch := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	pipe := s.client.Pipeline()
	for _, d := range batch {
		b, err := json.Marshal(d)
		if err != nil {
			continue
		}
		pipe.XAdd(ctx, &redis.XAddArgs{
			Stream: s.key, MaxLen: s.max, Approx: true,
			Values: []any{"id", d.RequestID, "d", b},
		})
	}
	_, err := pipe.Exec(ctx)
	if s.OnFlush != nil {
		s.OnFlush(err)
	}
	if err != nil {
		s.mu.Lock()
		s.pending = append(batch, s.pending...) // retry next time
		s.mu.Unlock()
		return fmt.Errorf("write decisions: %w", err)
	}
	return nil
}

// Get finds the newest decision for a request id, scanning the stream from
// the newest entry (an operator's query, not on the request path).
func (s *Stream) Get(ctx context.Context, id string) (*scheduler.Decision, error) {
	end := "+"
	for {
		msgs, err := s.client.XRevRangeN(ctx, s.key, end, "-", 500).Result()
		if err != nil {
			return nil, fmt.Errorf("read decisions: %w", err)
		}
		for _, m := range msgs {
			if m.Values["id"] != id {
				continue
			}
			raw, _ := m.Values["d"].(string)
			var d scheduler.Decision
			if err := json.Unmarshal([]byte(raw), &d); err != nil {
				return nil, fmt.Errorf("decode decision: %w", err)
			}
			return &d, nil
		}
		if len(msgs) < 500 {
			return nil, ErrNotFound
		}
		end = "(" + msgs[len(msgs)-1].ID
	}
}

// Fanout records to several recorders.
type Fanout []scheduler.Recorder

// Record records d in each.
func (f Fanout) Record(d *scheduler.Decision) {
	for _, r := range f {
		r.Record(d)
	}
}
