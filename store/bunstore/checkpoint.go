package bunstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints (SQLite files). By default SQLite checkpoints the WAL inside
// the COMMIT that pushes it past 1,000 pages, on the committing connection:
// here that is the one writer connection, so every few hundred writes one
// of them (and every write queued behind it) also waits for the copy of
// the WAL into the database file and its fsync. The writer connection
// therefore runs with wal_autocheckpoint=0, and a goroutine of its own runs
// the checkpoints, at most every checkpointEvery while writes happen, so
// hot pages rewritten by many transactions are copied once.
//
// Each checkpoint has two passes. The first copies what the WAL holds
// beside the writer, without taking the write lock. But SQLite starts the
// WAL over (writes it from its first frame again) only when a write
// transaction begins with every frame copied, and under a steady stream of
// writes the writer has always appended more by the time the copy ends:
// the WAL then grew by every commit, without bound (4.5 GB in 30 s of the
// create-yap benchmark), and each commit paid for extending the file. So
// the second pass holds the write lock, copies the few frames committed
// during the first, and lets the next write start the WAL over. The
// writer waits for that pass only: a few frames and two fsyncs.
//
// journal_size_limit caps what a WAL that did grow large (a long read that
// pinned it) keeps on disk once it starts over.
const walSizeLimit = 64 << 20

const checkpointEvery = 200 * time.Millisecond

type checkpointer struct {
	s    *Store
	kick chan struct{}
	stop chan struct{}
	done sync.WaitGroup

	// Tests: run between the two passes, and after both.
	afterFirstPass, afterCheckpoint atomic.Pointer[func()]
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
		c.checkpoint()
	}
}

// checkpoint runs both passes (see above). Errors (a busy file, a closing
// pool) are not fatal: the WAL stays intact and the next commit asks again.
func (c *checkpointer) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The connection is taken before the write lock: a writer holding a
	// pool connection while it waits for the lock must not wait for us.
	conn, err := c.s.sqldb.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		return
	}
	if f := c.afterFirstPass.Load(); f != nil {
		(*f)()
	}
	// The write lock is only tried for a while, not waited for: a holder
	// of it may be waiting for a pool connection, and on a host's small
	// pool ours may be the one it needs (CreateAccount used to, reopening
	// the writer does). The next commit asks again.
	if !c.lockWrites(ctx) {
		return
	}
	_, _ = conn.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
	c.s.writeMu.Unlock()
	if f := c.afterCheckpoint.Load(); f != nil {
		(*f)()
	}
}

// lockWrites takes the store's write lock if it comes free within
// checkpointLockWait, reporting whether it did.
func (c *checkpointer) lockWrites(ctx context.Context) bool {
	deadline := time.Now().Add(checkpointLockWait)
	for !c.s.writeMu.TryLock() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// checkpointLockWait bounds how long the checkpointer tries the write lock.
const checkpointLockWait = 100 * time.Millisecond

func (c *checkpointer) close() {
	if c == nil {
		return
	}
	close(c.stop)
	c.done.Wait()
}
