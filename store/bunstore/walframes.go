//go:build linux && (amd64 || arm64)

package bunstore

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// One pwrite per commit. SQLite writes each frame of a commit with two
// pwrite calls: the 24-byte frame header, then the page at the very next
// offset. On a busy server that is two syscalls per page of every commit,
// and the commit is the part of a write that no other write can overlap
// (group.go): in the create-yap benchmark a batch's commit writes tens of
// frames, and those syscalls were a tenth of the server's CPU, most of it
// per-call work (syscall entry and exit, the file system's bookkeeping)
// rather than copying.
//
// So the unix VFS's pwrite (replaceable through SQLite's system call table,
// sqlite3_vfs.xSetSystemCall) is wrapped: a frame appended where the
// descriptor's previous write ended (header, then its page) is copied into
// the descriptor's buffer and reported written, and so are the frames that
// follow it; the buffer goes out in one pwrite when the commit frame's page
// is appended (its header's database-size field is not zero), when the
// buffer is full, or before any other call on the descriptor. So the
// commit's pwrite returns only once every frame of the transaction is in
// the file, before SQLite publishes the commit (the WAL index header) and
// before COMMIT returns: no reader, in this process or another, and no
// checkpoint can look for a frame that is still buffered, and an
// acknowledged transaction is on disk exactly as without the buffer.
// Frames buffered before a commit (a transaction that spills pages to the
// WAL) are not yet part of any snapshot; if the process dies, SQLite's
// recovery ignores frames without a commit frame after them, as it ignores
// a torn write.
//
// Nothing else is delayed or reordered:
//   - any other call on the descriptor through the table (a write
//     elsewhere, such as SQLite rewriting a spilled page in place or the
//     headers of written frames at COMMIT (walRewriteChecksums), or a read,
//     pread, fstat, ftruncate, close) first writes the buffer, so every
//     later operation sees the file as SQLite wrote it;
//   - only appended writes of a frame's shape are buffered; a write that
//     SQLite splits (a sync point inside a frame) goes out after the buffer;
//   - a failed write of the buffer fails the call that flushed it, and
//     SQLite fails the transaction (frames after the last published commit
//     are never read).
//
// The table is process-wide: every database that modernc's SQLite opens in
// this process, the host application's too, writes its frames this way
// once a SQLite store was opened. The bytes on disk and the order in which
// they become visible to readers are the same. 32-bit platforms (where the
// table's size_t differs) and other systems keep SQLite's own writes.

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

	pending atomic.Int32 // descriptors with buffered frames: the fast path skips mu
	tracked atomic.Int32 // descriptors in fds: writes on others skip mu
	merged  atomic.Int64 // frames written together with their page (tests)
	flushes atomic.Int64 // buffers written, each with one pwrite (tests)

	mu  sync.Mutex
	fds map[int32]*frameBuf
}

// frameBufSize is how many bytes of frames a descriptor buffers before it
// writes them without waiting for the commit frame: 128 frames of 4 KiB
// pages (a create-yap batch's commit wrote 10 to 115 in an strace sample;
// a larger one takes a pwrite per 128 frames).
const frameBufSize = 128 * (walFrameHeaderSize + 4096)

// frameBuf holds the frames buffered for one descriptor, to be written at
// off (C memory, so that SQLite's own pwrite can take it).
type frameBuf struct {
	buf uintptr // frameBufSize + walFrameHeaderSize + maxPageSize bytes
	off int64
	n   int64 // bytes buffered; 0: none
	// page: the last buffered write was a frame header, its page is next;
	// commit: that header is the commit frame's.
	page, commit bool
	// next is where the descriptor's last write ended (-1: unknown). A
	// frame is buffered only when appended there.
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
		v := (*sqlite3.Tsqlite3_vfs)(cmem(vfs))
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
		walFrames.fds = map[int32]*frameBuf{}
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

// takeBuffered returns fd's buffer if it holds frames; from now on they
// are the caller's to write.
func takeBuffered(fd int32) *frameBuf {
	if walFrames.pending.Load() == 0 {
		return nil
	}
	walFrames.mu.Lock()
	defer walFrames.mu.Unlock()
	f := walFrames.fds[fd]
	if f == nil || f.n == 0 {
		return nil
	}
	walFrames.pending.Add(-1)
	return f
}

// track starts tracking fd's writes (see framePwrite), if not yet done.
func track(tls *libc.TLS, fd int32) {
	walFrames.mu.Lock()
	defer walFrames.mu.Unlock()
	trackLocked(tls, fd)
}

// trackLocked is track with walFrames.mu held; it returns fd's buffer, nil
// when there is no memory for one.
func trackLocked(tls *libc.TLS, fd int32) *frameBuf {
	if f := walFrames.fds[fd]; f != nil {
		return f
	}
	b := libc.Xmalloc(tls, frameBufSize+walFrameHeaderSize+maxPageSize)
	if b == 0 {
		return nil
	}
	f := &frameBuf{buf: b, next: -1}
	walFrames.fds[fd] = f
	walFrames.tracked.Add(1)
	return f
}

// startBuffer buffers the frame header at buf, to be written at off on fd,
// if off is where fd's last write ended (an appended frame). It reports
// false when it does not: the header is then written at once. The first
// header-shaped write on a descriptor starts its tracking (and is written
// at once).
func startBuffer(tls *libc.TLS, fd int32, buf uintptr, off int64) bool {
	walFrames.mu.Lock()
	defer walFrames.mu.Unlock()
	f := trackLocked(tls, fd)
	if f == nil || off != f.next {
		// Untracked until now (nothing known of the last write), or a
		// rewrite of a written frame's header: no page follows.
		return false
	}
	libc.Xmemcpy(tls, f.buf, buf, walFrameHeaderSize)
	f.off, f.n = off, walFrameHeaderSize
	f.page, f.commit = true, commitFrame(buf)
	walFrames.pending.Add(1)
	return true
}

// commitFrame reports whether the frame header at buf is a commit frame's:
// its second field, the database size in pages after the commit, is zero
// in every other frame.
func commitFrame(buf uintptr) bool {
	field := buf + 4 // C memory: read through the address's bits, as vet wants
	return **(**uint32)(unsafe.Pointer(&field)) != 0
}

// appendFrame adds the write of n bytes at buf to f, which the caller took
// (takeBuffered), if it continues f's frames: the page after a header, or
// the next frame's header while there is room for its page. It reports
// whether it did, and whether f must now be written (the commit frame is
// complete, or the buffer is full); when it did not, f is unchanged and
// still the caller's.
func appendFrame(tls *libc.TLS, f *frameBuf, buf uintptr, n uint64, off int64) (appended, flush bool) {
	if off != f.off+f.n {
		return false, false
	}
	switch {
	case f.page && n <= maxPageSize:
		f.page = false
		walFrames.merged.Add(1)
	case !f.page && n == walFrameHeaderSize && f.n < frameBufSize: // room for it and its page
		f.page, f.commit = true, commitFrame(buf)
	default:
		return false, false
	}
	libc.Xmemcpy(tls, f.buf+uintptr(f.n), buf, n)
	f.n += int64(n)
	return true, !f.page && (f.commit || f.n >= frameBufSize)
}

// putBack returns a taken buffer that still holds frames (takeBuffered's
// inverse; the buffer itself never left fds).
func putBack() { walFrames.pending.Add(1) }

// writeBuffer writes f's frames, taken by the caller, with one pwrite. It
// reports false, with errno set, when that failed.
func writeBuffer(tls *libc.TLS, fd int32, f *frameBuf) bool {
	n := f.n
	ok := writeAll(tls, fd, f.buf, uint64(n), f.off)
	end := f.off + n
	if !ok {
		end = -1
	}
	walFrames.mu.Lock()
	f.n, f.page, f.commit = 0, false, false
	f.next = end
	walFrames.mu.Unlock()
	walFrames.flushes.Add(1)
	return ok
}

// flushBuffered writes fd's buffered frames, if there are any. It reports
// false, with errno set, when that write failed.
func flushBuffered(tls *libc.TLS, fd int32) bool {
	f := takeBuffered(fd)
	return f == nil || writeBuffer(tls, fd, f)
}

// wrote records that a write on fd ended at end (-1: unknown), for
// startBuffer.
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
	if f := takeBuffered(fd); f != nil {
		appended, flush := appendFrame(tls, f, buf, n, off)
		switch {
		case appended && !flush:
			putBack()
			return int64(n)
		case appended:
			if !writeBuffer(tls, fd, f) {
				return -1
			}
			return int64(n)
		}
		// Not the next part of the buffered frames: they go out first.
		if !writeBuffer(tls, fd, f) {
			return -1
		}
	}
	if n == walFrameHeaderSize && frameHeaderAt(off) && startBuffer(tls, fd, buf, off) {
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
	if !flushBuffered(tls, fd) {
		return -1
	}
	return walFrames.orig.pread(tls, fd, buf, n, off)
}

func frameRead(tls *libc.TLS, fd int32, buf uintptr, n uint64) int64 {
	if !flushBuffered(tls, fd) {
		return -1
	}
	return walFrames.orig.read(tls, fd, buf, n)
}

func frameFstat(tls *libc.TLS, fd int32, st uintptr) int32 {
	if !flushBuffered(tls, fd) {
		return -1
	}
	return walFrames.orig.fstat(tls, fd, st)
}

func frameFtruncate(tls *libc.TLS, fd int32, size int64) int32 {
	if !flushBuffered(tls, fd) {
		return -1
	}
	wrote(fd, -1)
	return walFrames.orig.ftruncate(tls, fd, size)
}

// frameClose writes the buffered frames and forgets the descriptor, whose
// number the system may give to another file.
func frameClose(tls *libc.TLS, fd int32) int32 {
	ok := flushBuffered(tls, fd)
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
