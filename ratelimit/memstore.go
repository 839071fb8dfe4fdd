package ratelimit

import (
	"context"
	"sync"
	"time"

	limiter "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/common"
	"github.com/ulule/limiter/v3/drivers/store/memory"
)

// memStore is ulule's in-memory store (its cache and its arithmetic, as in
// memory.Store) with a cleaner the Limiter can stop. memory.NewStore starts
// a cleaner goroutine that only a GC finalizer stops and that the store
// does not expose; memory.NewCache(0) starts none, so memStore runs its own.
type memStore struct {
	prefix string
	cache  *memory.CacheWrapper
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

var _ limiter.Store = (*memStore)(nil)

// newMemStore returns a store whose expired counters are dropped every
// interval (> 0) until close.
func newMemStore(prefix string, interval time.Duration) *memStore {
	s := &memStore{
		prefix: prefix,
		cache:  memory.NewCache(0),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go s.clean(interval)
	return s
}

func (s *memStore) clean(interval time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.cache.Clean()
		case <-s.stop:
			return
		}
	}
}

// halt tells the cleaner to stop, without waiting. Safe to call twice.
func (s *memStore) halt() { s.once.Do(func() { close(s.stop) }) }

// close stops the cleaner and waits for it to exit. Safe to call twice.
func (s *memStore) close() {
	s.halt()
	<-s.done
}

func (s *memStore) key(key string) string { return s.prefix + ":" + key }

// Increment adds count to key's counter and returns its state.
func (s *memStore) Increment(_ context.Context, key string, count int64, rate limiter.Rate) (limiter.Context, error) {
	n, exp := s.cache.Increment(s.key(key), count, rate.Period)
	return common.GetContextFromState(time.Now(), rate, exp, n), nil
}

// Get counts one request for key and returns its state.
func (s *memStore) Get(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	return s.Increment(ctx, key, 1, rate)
}

// Peek returns key's state without counting.
func (s *memStore) Peek(_ context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	n, exp := s.cache.Get(s.key(key), rate.Period)
	return common.GetContextFromState(time.Now(), rate, exp, n), nil
}

// Reset drops key's counter.
func (s *memStore) Reset(_ context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	n, exp := s.cache.Reset(s.key(key), rate.Period)
	return common.GetContextFromState(time.Now(), rate, exp, n), nil
}
