package pgnotify

// Peers reports whether n publishes (another Notifier may listen).
func Peers(n *Notifier) bool { return n.peers.Load() }

// Unsent returns how many notices n did not send for lack of listeners.
func Unsent(n *Notifier) int64 { return n.unsent.Load() }

// CheckPeers runs one look in pg_stat_activity now.
func CheckPeers(n *Notifier) { n.checkPeers(n.ctx) }

// ShortHash is the channel tag in a listening connection's name.
func ShortHash(s string) string { return shortHash(s) }

// Buffered returns the incomplete messages n keeps of the other processes'
// parts, and the bytes they count against its caps.
func Buffered(n *Notifier) (messages, bytes int) { return n.parts.buffered() }
