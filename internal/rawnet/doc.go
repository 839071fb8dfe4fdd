// Package rawnet makes the reads and writes of a TCP or Unix socket as raw
// system calls (Linux), so that they do not count as system calls for Go's
// scheduler.
//
// A read or write through net.Conn marks its P as in a system call for the
// call's duration (entersyscall, exitsyscall). The runtime's monitor
// thread (sysmon) takes a P back from any call it finds running across two
// of its checks, hands the P to another thread, and after each such take
// polls again every 20 µs instead of backing off towards 10 ms. Under a
// steady load of small HTTP requests some connection is nearly always in a
// write that long (on loopback the write also runs the receiver's side of
// TCP), so the monitor never backs off: in the create-yap benchmark on
// Postgres it took 594 Ps in 4 s and slept 16,782 times, 6.7% of the
// server's CPU (perf). A socket is non-blocking, so its reads and writes
// never block: made with syscall.RawSyscall they keep the P, and Go's
// poller still does the waiting (RawConn.Read and Write, which also keep
// the deadlines).
//
// Wrap and Listener change nothing but how the bytes move: the other
// net.Conn methods, CloseWrite and SyscallConn are the socket's own (the
// rest of *net.TCPConn's, such as ReadFrom, are not on the wrapper), and a
// socket of another kind (TLS, a test's pipe) or on another system is
// returned as it is. Plain returns the
// socket under a wrapped connection. ReadFD and WriteFD are the single
// calls underneath, for code that reads a socket's descriptor itself
// through its syscall.RawConn (the sync server).
package rawnet
