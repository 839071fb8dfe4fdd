package ysync

import (
	"reflect"
	"time"
	"unsafe"

	"github.com/gorilla/websocket"
	"github.com/olahol/melody"
)

// Large sync step 2s.
//
// A y-websocket client that edited offline sends everything the server
// lacks in one frame: its sync step 2, the answer to our step 1. That frame
// may exceed MaxMessageSize. Closing it with 1009 is no answer: the client
// reconnects and sends the same frame again, forever, and the same happens
// to a client whose live update was too big (it reconnects, and its step 2
// holds that update). So while a connection that may write syncs, its read
// limit is MaxSyncStep2Size instead, if it gets one of the process's
// SyncStep2Slots.
//
// A connection syncs from its first frame until it sends anything but a
// valid step 1, update or awareness message under MaxMessageSize (its step
// 2, a text frame, a larger frame, a frame that does not decode), or until
// maxSyncFrames frames or maxSyncTime after it connected (checked at each
// frame and at each pong, so a client that takes a slot and goes quiet
// gives it back within a ping period). The limit is raised when its step 1
// arrives (a client sends its step 2 only after it got ours, which answers
// that step 1, so the step 2 always comes later) and lowered when it stops
// syncing or disconnects. Small updates do not end the sync: a y-websocket
// client sends its local edits as soon as its socket is open, so an edit
// made while it waits for our step 1 comes before its step 2, which must
// still get the raised limit. Gorilla checks the limit before it reads a
// frame, so the frame after the step 1 may be large whatever it is (a step
// 2 normally, or a large update); either way it ends the sync. So at most
// one frame per connection can be large. Such a frame keeps the slot until
// the room has applied it (or it was dropped), so at most SyncStep2Slots
// large frames are read or held at any time, whatever the clients send; a
// relayed one then counts against every connection's send queue like any
// frame (MaxSyncStep2Size is at most half of SendQueueBytes, and such an
// update is applied in a batch of its own).
//
// Read-only connections (viewers, archived lists) get no slot: their step
// 2s are not applied, and a public viewer code must not let anyone hold
// the slots.
//
// Gorilla checks the limit against the length in each frame's header,
// before it reads the payload (it reads a frame as it arrives, so a large
// frame costs memory only once it is sent). Melody sets the limit once
// when its read loop starts, and keeps the *websocket.Conn unexported, so
// gorillaConn reads it from the session; the limit is only changed from
// the read loop itself (handle and the pong handler run on it, between two
// frames), the goroutine that reads it.

// maxSyncFrames ends the sync phase of a connection that sends only step 1s
// and awareness messages: a y-websocket client sends its step 1, maybe an
// awareness update, and its step 2.
const maxSyncFrames = 8

// maxSyncTime ends the sync phase of a connection that has not sent its
// step 2 this long after it connected (a client answers our step 1, sent
// as it connects, at once). A large frame already being read is not cut.
const maxSyncTime = 10 * time.Second

// gorillaConn returns the websocket connection under ms, or nil if Melody
// no longer keeps it as the field conn (TestGorillaConn fails then, and
// large step 2s are refused as any large frame).
func gorillaConn(ms *melody.Session) *websocket.Conn {
	v := reflect.ValueOf(ms).Elem().FieldByName("conn")
	if !v.IsValid() || v.Type() != reflect.TypeFor[*websocket.Conn]() {
		return nil
	}
	return *(**websocket.Conn)(unsafe.Pointer(v.UnsafeAddr()))
}

// syncFrame is called by handle with every binary frame a connection sends
// while it syncs, and the frame decoded, before the frame is handled. Read
// loop only.
func (c *conn) syncFrame(frame []byte, m Message, err error) {
	c.syncFrames++
	if int64(len(frame)) > c.s.cfg.MaxMessageSize {
		// The large frame the raised limit let in: it takes the slot with
		// it (handle gives it back, or the room once applied).
		c.syncing = false
		if c.step2Slot {
			c.step2Slot, c.frameSlot = false, true
			c.ws.SetReadLimit(c.s.cfg.MaxMessageSize)
		}
		return
	}
	if c.closing.Load() || c.syncFrames >= maxSyncFrames || time.Since(c.connected) > c.s.maxSyncTime {
		c.endSync()
		return
	}
	switch {
	case err == nil && m.Type == MsgSync && m.SyncType == SyncStep1:
		c.raiseReadLimit()
	case err == nil && m.Type == MsgSync && m.SyncType == SyncUpdate:
		// An edit made before the client got our step 1 (see above).
	case err == nil && m.Type == MsgAwareness:
	default:
		c.endSync()
	}
}

// syncPong ends the sync phase of a connection past maxSyncTime. Melody
// calls it on the read loop when a pong arrives.
func (c *conn) syncPong() {
	if c.syncing && time.Since(c.connected) > c.s.maxSyncTime {
		c.endSync()
	}
}

// raiseReadLimit lets the connection's next frame be as large as
// MaxSyncStep2Size, if it may write and a slot is free. Read loop only.
func (c *conn) raiseReadLimit() {
	if c.step2Slot || c.ws == nil || c.readOnly.Load() || c.s.cfg.MaxSyncStep2Size <= c.s.cfg.MaxMessageSize {
		return
	}
	select {
	case c.s.step2Slots <- struct{}{}: // a nil channel (no slots) is never ready
	default:
		return
	}
	c.step2Slot = true
	c.ws.SetReadLimit(c.s.cfg.MaxSyncStep2Size)
}

// endSync ends the connection's sync phase and gives its slot back. Read
// loop, or disconnect once the read loop ended.
func (c *conn) endSync() {
	c.syncing = false
	if !c.step2Slot {
		return
	}
	c.step2Slot = false
	c.ws.SetReadLimit(c.s.cfg.MaxMessageSize)
	c.s.releaseStep2Slot()
}

// releaseStep2Slot gives back a slot taken by raiseReadLimit. It never
// blocks: a release without a slot would be a bug, not a reason to hang a
// read loop.
func (s *Server) releaseStep2Slot() {
	select {
	case <-s.step2Slots:
	default:
		s.log.Error("sync: a step 2 slot was given back twice")
	}
}
