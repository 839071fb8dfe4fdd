package ysync

import (
	"reflect"
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
// holds that update). So while a connection syncs, its read limit is
// MaxSyncStep2Size instead, if it gets one of the process's SyncStep2Slots.
//
// A connection syncs from its first frame until it sends anything but a
// step 1 or an awareness message under MaxMessageSize (its step 2, an
// update, a larger frame), or until maxSyncFrames frames. The limit is
// raised when its step 1 arrives (a client sends its step 2 only after it
// got ours, which answers that step 1, so the step 2 always comes later) and
// lowered, with the slot given back, when it stops syncing or disconnects.
// Gorilla checks the limit before it reads a frame, so the frame after the
// step 1 may be large whatever it is (a step 2 normally, or a large update);
// either way it ends the sync. So at most one frame per connection can be
// large, and at most SyncStep2Slots connections of the process can be
// reading one at any time.
//
// A connection that takes a slot and then sends nothing keeps it; with all
// of them taken, a large step 2 fails as before (1009, and its client
// retries until one is free). Small frames are never affected.
//
// Gorilla checks the limit against the length in each frame's header,
// before it reads the payload (it reads a frame as it arrives, so a large
// frame costs memory only once it is sent). Melody sets the limit once, when its read loop
// starts, and keeps the *websocket.Conn unexported, so gorillaConn reads it
// from the session; the limit is only changed from the read loop itself
// (handle runs on it, between two frames), the goroutine that reads it.

// maxSyncFrames ends the sync phase of a connection that sends only step 1s
// and awareness messages: a y-websocket client sends its step 1, maybe an
// awareness update, and its step 2.
const maxSyncFrames = 8

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

// syncFrame is called by handle with every frame a connection sends while
// it syncs, before the frame is handled. Read loop only.
func (c *conn) syncFrame(frame []byte) {
	c.syncFrames++
	d := decoder{b: frame}
	typ, _ := d.varUint()
	sub, _ := d.varUint()
	switch {
	case int64(len(frame)) > c.s.cfg.MaxMessageSize || c.syncFrames >= maxSyncFrames:
		c.endSync()
	case typ == MsgSync && sub == SyncStep1:
		c.raiseReadLimit()
	case typ == MsgAwareness:
	default:
		c.endSync()
	}
}

// raiseReadLimit lets the connection's next frames be as large as
// MaxSyncStep2Size, if a slot is free. Read loop only.
func (c *conn) raiseReadLimit() {
	if c.step2Slot || c.ws == nil || c.s.cfg.MaxSyncStep2Size <= c.s.cfg.MaxMessageSize {
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

// endSync ends the connection's sync phase. Read loop, or disconnect once
// the read loop ended.
func (c *conn) endSync() {
	c.syncing = false
	if !c.step2Slot {
		return
	}
	c.step2Slot = false
	c.ws.SetReadLimit(c.s.cfg.MaxMessageSize)
	<-c.s.step2Slots
}
