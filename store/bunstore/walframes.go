//go:build linux && (amd64 || arm64)

package bunstore

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// One pwrite per WAL frame. SQLite writes each frame of a commit with two
// pwrite calls: the 24-byte frame header, then the page at the very next
// offset. On a busy server that is two syscalls per page of every commit,
// and the commit is the part of a write that no other write can overlap
// (group.go): it was a tenth of the server's CPU in the create-yap
// benchmark, nearly all of it syscall entry and exit rather than copying.
//
// So the unix VFS's pwrite (replaceable through SQLite's system call table,
// sqlite3_vfs.xSetSystemCall) is wrapped: a 24-byte write at an offset where
// a frame header can start, right where the descriptor's previous write
// ended (a frame appended after the last), is held in memory and reported
// written, and the write that follows on the same descriptor, the page at
// the next offset, goes out together with it in one pwrite. Only appended
// headers are held: SQLite also rewrites the headers of frames already
// written (walRewriteChecksums, at COMMIT, when a transaction changed a
// page it had spilled to the WAL), and no page write follows the last of
// those, the commit frame's; held, it stayed in memory after COMMIT
// returned, and a process killed then lost the acknowledged transaction
// (SQLite store review of 2026-11-22). Nothing else is delayed or
// reordered:
//   - SQLite publishes a frame (the WAL index header) only after its page
//     write returned, so no reader, in this process or another, can look
//     for a header that is still held;
//   - any other call on the descriptor through the table (a write
//     elsewhere, read, pread, fstat, ftruncate, close) first writes the
//     held header on its own, so every later operation sees the file as
//     SQLite wrote it;
//   - a failed page write fails the frame, as it would have anyway.
//
// The table is process-wide: every database that modernc's SQLite opens in
// this process, the host application's too, writes its frames this way
// once a SQLite store was opened. The bytes on disk and the order in which
// they become visible are the same. 32-bit platforms (where the table's
// size_t differs) and other systems keep SQLite's own writes.

// The system calls as modernc's translation of the unix VFS calls them
// (pioCall: pread and pwrite).
type (
	pioCall       = func(tls *libc.TLS, fd int32, buf uintptr, n uint64, off int64) int64
	readCall      = func(tls *libc.TLS, fd int32, buf uintptr, n uint64) int64
	fstatCall     = func(tls *libc.TLS, fd int32, st uintptr) int32
	ftruncateCall = func(tls *libc.TLS, fd int32, size int64) int32
	closeCall     = func(tls *libc.TLS, fd int32) int32
)

const (
	walHeaderSize      = 32 // the WAL file's own header
	walFrameHeaderSize = 24 // each frame's header, before its page
	maxPageSize        = 65536
)

var walFrames struct {
	once sync.Once

	orig struct {
		pwrite, pread pioCall
		read          readCall
		fstat         fstatCall
		ftruncate     ftruncateCall
		close         closeCall
	}

	holding atomic.Int32 // descriptors with a held header: the fast path skips mu
	tracked atomic.Int32 // descriptors in fds: writes on others skip mu
	merged  atomic.Int64 // frames written with one pwrite (tests)

	mu  sync.Mutex
	fds map[int32]*heldFrame
}

// heldFrame is the frame being written on one descriptor: its header,
// held, and the buffer header and page are sent from (C memory, so that
// SQLite's own pwrite can take it).
type heldFrame struct {
	held bool
	off  int64
	buf  uintptr // walFrameHeaderSize + maxPageSize bytes
	// next is where the descriptor's last write ended (-1: unknown). A
	// header is held only when written there.
	next int64
}

// installWALFrameWrites wraps the unix VFS's system calls as described
// above, once per process.
func installWALFrameWrites() {
	walFrames.once.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		vfs := sqlite3.Xsqlite3_vfs_find(tls, 0)
		if vfs == 0 {
			return
		}
		v := (*sqlite3.Tsqlite3_vfs)(*(*unsafe.Pointer)(unsafe.Pointer(&vfs)))
		get := *(*func(*libc.TLS, uintptr, uintptr) uintptr)(unsafe.Pointer(&v.FxGetSystemCall))
		set := *(*func(*libc.TLS, uintptr, uintptr, uintptr) int32)(unsafe.Pointer(&v.FxSetSystemCall))

		calls := []struct {
			name string
			wrap any             // the wrapper, of one of the call types above
			keep func(p uintptr) // stores the original
		}{
			{"pwrite", pioCall(framePwrite), func(p uintptr) { walFrames.orig.pwrite = asCall[pioCall](p) }},
			{"pread", pioCall(framePread), func(p uintptr) { walFrames.orig.pread = asCall[pioCall](p) }},
			{"read", readCall(frameRead), func(p uintptr) { walFrames.orig.read = asCall[readCall](p) }},
			{"fstat", fstatCall(frameFstat), func(p uintptr) { walFrames.orig.fstat = asCall[fstatCall](p) }},
			{"ftruncate", ftruncateCall(frameFtruncate), func(p uintptr) { walFrames.orig.ftruncate = asCall[ftruncateCall](p) }},
			{"close", closeCall(frameClose), func(p uintptr) { walFrames.orig.close = asCall[closeCall](p) }},
		}
		names := make([]uintptr, 0, len(calls))
		defer func() {
			for _, n := range names {
				libc.Xfree(tls, n)
			}
		}()
		origs := make([]uintptr, len(calls))
		for i, c := range calls {
			n, err := libc.CString(c.name)
			if err != nil {
				return
			}
			names = append(names, n)
			if origs[i] = get(tls, vfs, n); origs[i] == 0 {
				return // not the unix VFS: leave every call alone
			}
		}
		for i, c := range calls {
			c.keep(origs[i])
		}
		walFrames.fds = map[int32]*heldFrame{}
		for i, c := range calls {
			set(tls, vfs, names[i], funcPointer(c.wrap))
		}
	})
}

// asCall is the C function pointer p as a Go func: in modernc's C a
// function pointer is a func value's word.
func asCall[F any](p uintptr) F { return *(*F)(unsafe.Pointer(&p)) }

// funcPointer is f as a C function pointer (asCall's inverse).
func funcPointer(f any) uintptr { return (*[2]uintptr)(unsafe.Pointer(&f))[1] }

// frameHeaderAt reports whether off is where a WAL frame header starts for
// one of the page sizes SQLite allows.
func frameHeaderAt(off int64) bool {
	if off < walHeaderSize {
		return false
	}
	for ps := int64(512); ps <= maxPageSize; ps *= 2 {
		if (off-walHeaderSize)%(walFrameHeaderSize+ps) == 0 {
			return true
		}
	}
	return false
}

// takeHeld returns fd's held header, nil if none is held; from now on it
// is the caller's to write.
func takeHeld(fd int32) *heldFrame {
	if walFrames.holding.Load() == 0 {
		return nil
	}
	walFrames.mu.Lock()
	defer walFrames.mu.Unlock()
	f := walFrames.fds[fd]
	if f == nil || !f.held {
		return nil
	}
	f.held = false
	walFrames.holding.Add(-1)
	return f
}

// track starts tracking fd's writes (see hold), if not yet done.
func track(tls *libc.TLS, fd int32) {
	walFrames.mu.Lock()
	defer walFrames.mu.Unlock()
	trackLocked(tls, fd)
}

// trackLocked is track with walFrames.mu held; it returns fd's frame, nil
// when there is no memory for one.
func trackLocked(tls *libc.TLS, fd int32) *heldFrame {
	if f := walFrames.fds[fd]; f != nil {
		return f
	}
	b := libc.Xmalloc(tls, walFrameHeaderSize+maxPageSize)
	if b == 0 {
		return nil
	}
	f := &heldFrame{buf: b, next: -1}
	walFrames.fds[fd] = f
	walFrames.tracked.Add(1)
	return f
}

// hold keeps the frame header at buf, to be written at off on fd with the
// page that follows, if off is where fd's last write ended (an appended
// frame). It reports false when it does not hold it: the header is then
// written at once. The first header-shaped write on a descriptor starts
// its tracking (and is written at once).
func hold(tls *libc.TLS, fd int32, buf uintptr, off int64) bool {
	walFrames.mu.Lock()
	defer walFrames.mu.Unlock()
	f := trackLocked(tls, fd)
	if f == nil || off != f.next {
		// Untracked until now (nothing known of the last write), or a
		// rewrite of a written frame's header: no page follows.
		return false
	}
	libc.Xmemcpy(tls, f.buf, buf, walFrameHeaderSize)
	f.held, f.off = true, off
	walFrames.holding.Add(1)
	return true
}

// flushHeld writes fd's held header on its own, if there is one. It
// reports false, with errno set, when that write failed.
func flushHeld(tls *libc.TLS, fd int32) bool {
	f := takeHeld(fd)
	if f == nil {
		return true
	}
	if !writeAll(tls, fd, f.buf, walFrameHeaderSize, f.off) {
		wrote(fd, -1)
		return false
	}
	wrote(fd, f.off+walFrameHeaderSize)
	return true
}

// wrote records that a write on fd ended at end (-1: unknown), for hold.
func wrote(fd int32, end int64) {
	if walFrames.tracked.Load() == 0 {
		return
	}
	walFrames.mu.Lock()
	if f := walFrames.fds[fd]; f != nil {
		f.next = end
	}
	walFrames.mu.Unlock()
}

func writeAll(tls *libc.TLS, fd int32, buf uintptr, n uint64, off int64) bool {
	for done := uint64(0); done < n; {
		r := walFrames.orig.pwrite(tls, fd, buf+uintptr(done), n-done, off+int64(done))
		if r <= 0 {
			return false
		}
		done += uint64(r)
	}
	return true
}

func framePwrite(tls *libc.TLS, fd int32, buf uintptr, n uint64, off int64) int64 {
	if f := takeHeld(fd); f != nil {
		if off == f.off+walFrameHeaderSize && n <= maxPageSize {
			libc.Xmemcpy(tls, f.buf+walFrameHeaderSize, buf, n)
			if !writeAll(tls, fd, f.buf, walFrameHeaderSize+n, f.off) {
				wrote(fd, -1)
				return -1
			}
			wrote(fd, off+int64(n))
			walFrames.merged.Add(1)
			return int64(n)
		}
		// Not the frame's page: the header goes out alone first.
		if !writeAll(tls, fd, f.buf, walFrameHeaderSize, f.off) {
			wrote(fd, -1)
			return -1
		}
	}
	if n == walFrameHeaderSize && frameHeaderAt(off) && hold(tls, fd, buf, off) {
		return walFrameHeaderSize
	}
	if off == 0 && n == walHeaderSize {
		track(tls, fd) // a WAL (re)starts: its first frame follows
	}
	r := walFrames.orig.pwrite(tls, fd, buf, n, off)
	if r == int64(n) {
		wrote(fd, off+r)
	} else {
		wrote(fd, -1)
	}
	return r
}

func framePread(tls *libc.TLS, fd int32, buf uintptr, n uint64, off int64) int64 {
	if !flushHeld(tls, fd) {
		return -1
	}
	return walFrames.orig.pread(tls, fd, buf, n, off)
}

func frameRead(tls *libc.TLS, fd int32, buf uintptr, n uint64) int64 {
	if !flushHeld(tls, fd) {
		return -1
	}
	return walFrames.orig.read(tls, fd, buf, n)
}

func frameFstat(tls *libc.TLS, fd int32, st uintptr) int32 {
	if !flushHeld(tls, fd) {
		return -1
	}
	return walFrames.orig.fstat(tls, fd, st)
}

func frameFtruncate(tls *libc.TLS, fd int32, size int64) int32 {
	if !flushHeld(tls, fd) {
		return -1
	}
	wrote(fd, -1)
	return walFrames.orig.ftruncate(tls, fd, size)
}

// frameClose writes a held header and forgets the descriptor, whose
// number the system may give to another file.
func frameClose(tls *libc.TLS, fd int32) int32 {
	ok := flushHeld(tls, fd)
	walFrames.mu.Lock()
	f := walFrames.fds[fd]
	if f != nil {
		delete(walFrames.fds, fd)
		walFrames.tracked.Add(-1)
	}
	walFrames.mu.Unlock()
	if f != nil {
		libc.Xfree(tls, f.buf)
	}
	r := walFrames.orig.close(tls, fd)
	if !ok {
		return -1
	}
	return r
}
