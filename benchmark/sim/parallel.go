package sim

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
)

// Runs are independent (each its own store, engines and replicas, on its
// own goroutine): a study runs several at once, and its report is the
// same whatever the number, as results are kept by index.

// forEach calls do(i) for every i in [0, n) on up to jobs goroutines (0:
// GOMAXPROCS). After an error no new call starts; the error returned is
// that of the lowest i that failed, so it does not depend on timing.
func forEach(n, jobs int, do func(i int) error) error {
	jobs = effectiveJobs(n, jobs)
	errs := make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if errs[i] = do(i); errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// effectiveJobs is how many of n runs go at once when jobs are asked
// for (0: GOMAXPROCS).
func effectiveJobs(n, jobs int) int {
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	return max(min(jobs, n), 1)
}

// progressLog writes progress lines from concurrent runs, one at a time;
// a nil writer drops them.
type progressLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *progressLog) printf(format string, a ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, a...)
}

// sharedRequests generates a (rate, seed)'s requests once for the runs
// that use them, and drops them when the last is done: concurrent runs of
// one seed share them, and a study holds only the seeds running.
type sharedRequests struct {
	once  sync.Once
	reqs  []Request
	users atomic.Int64
}

func newSharedRequests(users int) *sharedRequests {
	s := &sharedRequests{}
	s.users.Store(int64(users))
	return s
}

func (s *sharedRequests) get(gen func() []Request) []Request {
	s.once.Do(func() { s.reqs = gen() })
	return s.reqs
}

// done is called once by each user after its last use of get's slice.
func (s *sharedRequests) done() {
	if s.users.Add(-1) == 0 {
		s.reqs = nil
	}
}
