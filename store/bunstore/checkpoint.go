package bunstore

import (
	"context"
	"sync"
	"time"
)

// Checkpoints (SQLite files). By default SQLite checkpoints the WAL inside
// the COMMIT that pushes it past 1,000 pages, on the committing connection:
// here that is the one writer connection, so every few hundred writes one
// of them (and every write queued behind it) also waits for the copy of
// the WAL into the database file and its fsync. The writer connection
// therefore runs with wal_autocheckpoint=0, and a goroutine of its own runs
// PASSIVE checkpoints on a pool connection, which copy what they can
// without taking the write lock, concurrently with the writer. It runs at
// most every checkpointEvery while writes happen, so hot pages rewritten
// by many transactions are copied once.
const checkpointEvery = 200 * time.Millisecond

type checkpointer struct {
	s    *Store
	kick chan struct{}
	stop chan struct{}
	done sync.WaitGroup
}

func (s *Store) startCheckpointer() {
	c := &checkpointer{s: s, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	s.ckpt = c
	c.done.Add(1)
	go c.run()
}

// committed tells the checkpointer the WAL grew. It never blocks.
func (c *checkpointer) committed() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer c.done.Done()
	last := time.Time{}
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		if wait := checkpointEvery - time.Since(last); wait > 0 {
			select {
			case <-c.stop:
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// Errors (a busy file, a closing pool) are not fatal: the WAL
		// stays intact and the next commit asks again.
		_, _ = c.s.sqldb.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		cancel()
	}
}

func (c *checkpointer) close() {
	if c == nil {
		return
	}
	close(c.stop)
	c.done.Wait()
}
