//go:build !(linux && (amd64 || arm64))

package bunstore

// installWALFrameWrites leaves SQLite's writes alone here (walframes.go).
func installWALFrameWrites() {}
