package yjs_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

const tracePath = "/work/shared/traces/automerge-paper.json.gz"

// traceClientID is a typical random 32 bit client id (5 byte varuint); the
// 311,038 byte size Yjs reports depends on that width.
const traceClientID = 3735928559

// editTrace is a text editing trace in the automerge-perf format.
type editTrace struct {
	EndContent string `json:"endContent"`
	Txns       []struct {
		Patches [][3]any `json:"patches"`
	} `json:"txns"`
}

type patch struct {
	pos, del int
	ins      string
}

var (
	traceOnce    sync.Once
	tracePatches []patch
	traceEnd     string
	traceErr     error
)

func loadTrace(tb testing.TB) ([]patch, string) {
	tb.Helper()
	traceOnce.Do(func() {
		f, err := os.Open(tracePath)
		if err != nil {
			traceErr = err
			return
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			traceErr = err
			return
		}
		var tr editTrace
		if traceErr = json.NewDecoder(zr).Decode(&tr); traceErr != nil {
			return
		}
		for _, tx := range tr.Txns {
			for _, p := range tx.Patches {
				tracePatches = append(tracePatches, patch{int(p[0].(float64)), int(p[1].(float64)), p[2].(string)})
			}
		}
		traceEnd = tr.EndContent
	})
	if traceErr != nil {
		tb.Skipf("trace not available: %v", traceErr)
	}
	return tracePatches, traceEnd
}

// replayTrace applies every patch as its own transaction.
func replayTrace(patches []patch) *yjs.Doc {
	doc := yjs.NewDoc(yjs.WithClientID(traceClientID))
	text := doc.GetText("text")
	for _, p := range patches {
		if p.del > 0 {
			text.Delete(p.pos, p.del)
		}
		if p.ins != "" {
			text.Insert(p.pos, p.ins, nil)
		}
	}
	return doc
}

func TestTraceReplay(t *testing.T) {
	patches, end := loadTrace(t)
	doc := replayTrace(patches)
	require.Equal(t, end, doc.GetText("text").String())
	update, err := doc.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	require.Len(t, update, 311038, "Yjs encodes this trace in 311,038 bytes")
	fresh := yjs.NewDoc()
	require.NoError(t, fresh.ApplyUpdate(update, nil))
	require.Equal(t, end, fresh.GetText("text").String())
	again, err := fresh.EncodeStateAsUpdate(nil)
	require.NoError(t, err)
	require.Equal(t, update, again)
}

func BenchmarkTraceApply(b *testing.B) {
	patches, _ := loadTrace(b)
	b.ReportAllocs()
	var live uint64
	peak := samplePeakHeap()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		doc := replayTrace(patches)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		live = max(live, ms.HeapAlloc)
		runtime.KeepAlive(doc)
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(live)/(1<<20), "heapMB")
	b.ReportMetric(float64(peak())/(1<<20), "peakHeapMB")
}

// samplePeakHeap samples the heap size every few milliseconds until the
// returned function is called, which reports the largest size seen.
func samplePeakHeap() func() uint64 {
	var peak uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		return peak
	}
}

// cpuTime returns the process CPU time in nanoseconds; on a loaded machine
// it is a steadier measure than wall time.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkTraceEncode(b *testing.B) {
	patches, _ := loadTrace(b)
	doc := replayTrace(patches)
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		u, _ := doc.EncodeStateAsUpdate(nil)
		n = len(u)
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(n), "bytes")
}

func BenchmarkTraceDecode(b *testing.B) {
	patches, _ := loadTrace(b)
	update, _ := replayTrace(patches).EncodeStateAsUpdate(nil)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		doc := yjs.NewDoc()
		if err := doc.ApplyUpdate(update, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkTraceRemoteUpdates applies the trace as 259,778 small remote
// updates (one per edit), the workload of a sync server.
func BenchmarkTraceRemoteUpdates(b *testing.B) {
	patches, end := loadTrace(b)
	src := yjs.NewDoc(yjs.WithClientID(traceClientID))
	var updates [][]byte
	src.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
	text := src.GetText("text")
	for _, p := range patches {
		src.Transact(func(*yjs.Transaction) {
			if p.del > 0 {
				text.Delete(p.pos, p.del)
			}
			if p.ins != "" {
				text.Insert(p.pos, p.ins, nil)
			}
		}, nil)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		doc := yjs.NewDoc()
		for _, u := range updates {
			if err := doc.ApplyUpdate(u, nil); err != nil {
				b.Fatal(err)
			}
		}
		if i == 0 && doc.GetText("text").String() != end {
			b.Fatal("remote replay differs from endContent")
		}
	}
}

// BenchmarkEncodeYapsState encodes the full state of a list document of
// 5,000 yaps (maps with a text each), as a compaction does. After the
// first encoding, the buffer is sized from the last one (fullSizeEstimate)
// instead of by walking the document.
func BenchmarkEncodeYapsState(b *testing.B) {
	doc := yjs.NewDoc(yjs.WithClientID(7))
	yapsMap := doc.GetMap("yaps")
	for i := range 5000 {
		doc.Transact(func(*yjs.Transaction) {
			y := yjs.NewMap()
			yapsMap.Set(fmt.Sprintf("yap-%06d", i), y)
			y.Set("kind", "task")
			y.Set("status", "open")
			y.Set("createdAt", "2026-11-29T22:00:00.000Z")
			txt := yjs.NewText("")
			y.Set("content", txt)
			txt.Insert(0, fmt.Sprintf("bench yap %d", i), nil)
		}, nil)
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		u, err := doc.EncodeStateAsUpdate(nil)
		if err != nil {
			b.Fatal(err)
		}
		n = len(u)
	}
	b.ReportMetric(float64(n), "bytes")
}
