package sim

import (
	"container/heap"
	"time"
)

// kind is an event's kind; at one instant, events run in this order (see
// the package doc).
type kind uint8

const (
	kindStepEnd kind = iota
	kindArrival
	kindTimer
	kindScrape
	kindRefresh
	kindPlan
)

// event is one thing that happens at a virtual time; i is the GPU, the
// request or the replica it concerns.
type event struct {
	at   time.Duration
	kind kind
	seq  uint64 // insertion order: ties of time and kind run first in, first out
	i    int
}

// queue is the event queue, earliest first.
type queue struct {
	h   eventHeap
	seq uint64
}

func (q *queue) push(at time.Duration, k kind, i int) {
	q.seq++
	heap.Push(&q.h, event{at: at, kind: k, seq: q.seq, i: i})
}

func (q *queue) pop() event { return heap.Pop(&q.h).(event) }

func (q *queue) len() int { return len(q.h) }

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }

func (h eventHeap) Less(a, b int) bool {
	x, y := h[a], h[b]
	if x.at != y.at {
		return x.at < y.at
	}
	if x.kind != y.kind {
		return x.kind < y.kind
	}
	return x.seq < y.seq
}

func (h eventHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }

func (h *eventHeap) Push(x any) { *h = append(*h, x.(event)) }

func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
