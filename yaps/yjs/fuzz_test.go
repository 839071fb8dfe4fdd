package yjs_test

// Fuzz tests for the update and state vector decoders. Seeds are real Yjs
// updates in testdata/fuzz/yjs-seeds (written by interop/yjs/gen.mjs); the
// fuzzer's findings land in testdata/fuzz/Fuzz*/ and are replayed by plain
// `go test`.
//
//	go test -run='^$' -fuzz=FuzzApplyUpdate -fuzztime=60s ./yaps/yjs/

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// maxFuzzInput keeps single inputs small so every run stays fast.
const maxFuzzInput = 1 << 14

func seedUpdates(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "yjs-seeds", "*.bin"))
	require.NoError(tb, err)
	require.NotEmpty(tb, files, "no seed updates in testdata/fuzz/yjs-seeds")
	out := make([][]byte, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(tb, err)
		out = append(out, b)
	}
	return out
}

// handmade inputs that poke at edge cases of the framing.
var fuzzExtraSeeds = [][]byte{
	{},
	{0, 0},       // empty update: no structs, no deletes
	{0},          // truncated delete set
	{1, 1, 0, 0}, // one client with no struct count...
	{0, 1, 5, 1, 0, 3},
	{1, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0, 0},
}

// hasPending reports whether some structs of update are not integrated in d
// (pending on missing dependencies): the diff of update against d's state
// vector then still holds structs (its first varuint, the client count, is
// not zero). State vectors of updates cannot tell, as they only count
// structs from clock 0 on.
func hasPending(t *testing.T, d *yjs.Doc, update []byte) bool {
	t.Helper()
	diff, err := yjs.DiffUpdate(update, d.EncodeStateVector())
	return err != nil || len(diff) == 0 || diff[0] != 0
}

// fuzzDocState is the comparable view of a doc (canonical JSON + state vector).
func fuzzDocState(d *yjs.Doc) (any, map[uint64]uint64) {
	return iopCanon(d.ToJSON()), d.StateVector()
}

// FuzzApplyUpdate: applying arbitrary bytes never panics or hangs;
// ApplyUpdateWhole applies it exactly when ApplyUpdate leaves nothing
// pending; when an update applies, the document re-encodes, and the re-encoding applies to a
// fresh document with the same state vector and, unless structs are pending,
// the same content. (With pending structs real Yjs itself integrates the
// re-encoding differently: see testdata/fuzz/FuzzApplyUpdate/2b69d672daf4bb93,
// where Yjs 13.6 shows exactly the same change.) Content is not compared
// either when the update or its re-encoding holds an item whose right origin
// lies at or before its origin inside one struct (see RightOriginNotRight):
// Yjs 13.6 places such an item differently depending on where the structs
// are cut, and moves a format end on re-encoding
// testdata/fuzz/FuzzApplyUpdate/862fd3de6c042176 exactly as Go does.
func FuzzApplyUpdate(f *testing.F) {
	for _, s := range seedUpdates(f) {
		f.Add(s)
	}
	for _, s := range fuzzExtraSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		d := yjs.NewDoc(yjs.WithClientID(1))
		w := yjs.NewDoc(yjs.WithClientID(1))
		applied, _ := w.ApplyUpdateWhole(data, nil)
		if err := d.ApplyUpdate(data, nil); err != nil {
			// a rejected update must leave a usable document
			_, err := d.EncodeStateAsUpdate(nil)
			require.NoError(t, err, "EncodeStateAsUpdate after a rejected update")
			_ = d.ToJSON()
			require.False(t, applied, "ApplyUpdateWhole applied an update ApplyUpdate rejects")
			return
		}
		// ApplyUpdateWhole applies exactly what integrates with nothing
		// pending, and otherwise changes nothing.
		ps, pds := d.Pending()
		require.Equal(t, len(ps)+len(pds) == 0, applied, "ApplyUpdateWhole against ApplyUpdate's pending sets")
		if !applied {
			require.Empty(t, w.StateVector(), "a refused update changes nothing")
		}
		json1, sv1 := fuzzDocState(d)
		pending := hasPending(t, d, data)

		enc, err := d.EncodeStateAsUpdate(nil)
		require.NoError(t, err, "EncodeStateAsUpdate after a successful apply")
		d2 := yjs.NewDoc(yjs.WithClientID(2))
		require.NoError(t, d2.ApplyUpdate(enc, nil), "re-applying the doc's own encoding")
		json2, sv2 := fuzzDocState(d2)
		require.Equal(t, sv1, sv2, "state vector after re-encode")
		if !pending && !yjs.RightOriginNotRight(data) && !yjs.RightOriginNotRight(enc) {
			require.Equal(t, json1, json2, "content after re-encode")
		}

		// applying the same update again changes nothing
		require.NoError(t, d.ApplyUpdate(data, nil), "re-applying the same update")
		json3, sv3 := fuzzDocState(d)
		require.Equal(t, sv1, sv3, "state vector after applying twice")
		require.Equal(t, json1, json3, "content after applying twice")

		// the update-level helpers agree with the document
		svU, err := yjs.EncodeStateVectorFromUpdate(data)
		require.NoError(t, err, "EncodeStateVectorFromUpdate of an applicable update")
		_, err = yjs.DecodeStateVector(svU)
		require.NoError(t, err)
		merged, err := yjs.MergeUpdates([][]byte{data})
		require.NoError(t, err, "MergeUpdates of an applicable update")
		d3 := yjs.NewDoc(yjs.WithClientID(3))
		require.NoError(t, d3.ApplyUpdate(merged, nil), "applying MergeUpdates([update])")
		json4, sv4 := fuzzDocState(d3)
		require.Equal(t, sv1, sv4, "state vector via MergeUpdates")
		if !pending {
			require.Equal(t, json1, json4, "content via MergeUpdates")
		}
	})
}

// FuzzMergeUpdates: merging arbitrary updates never panics; when both inputs
// apply cleanly and completely (nothing pending, alone or together) and give
// the same document in either order, the merge applies cleanly and gives that
// document too. DiffUpdate
// against either input's state vector never panics. (With pending structs
// Yjs's own mergeUpdates loses them: see testdata/fuzz/FuzzMergeUpdates/
// b30f902581dc84d9, where Yjs 13.6 gives the same result as Go.)
func FuzzMergeUpdates(f *testing.F) {
	seeds := seedUpdates(f)
	for i := range seeds {
		f.Add(seeds[i], seeds[(i+1)%len(seeds)])
	}
	f.Add([]byte{0, 0}, []byte{0, 0})
	f.Add([]byte{}, []byte{0, 0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if len(a)+len(b) > maxFuzzInput {
			return
		}
		merged, mergeErr := yjs.MergeUpdates([][]byte{a, b})
		if sv, err := yjs.EncodeStateVectorFromUpdate(a); err == nil {
			_, _ = yjs.DiffUpdate(b, sv)
		}
		if sv, err := yjs.EncodeStateVectorFromUpdate(b); err == nil {
			_, _ = yjs.DiffUpdate(a, sv)
		}

		ref := yjs.NewDoc(yjs.WithClientID(1))
		if ref.ApplyUpdate(a, nil) != nil || hasPending(t, ref, a) || ref.ApplyUpdate(b, nil) != nil {
			return
		}
		// Each applies cleanly and completely on its own, too.
		one := yjs.NewDoc(yjs.WithClientID(4))
		if one.ApplyUpdate(b, nil) != nil || hasPending(t, one, b) {
			return
		}
		// and nothing is pending after applying both
		for _, u := range [][]byte{a, b} {
			if hasPending(t, ref, u) {
				return
			}
		}
		// Applied in the other order the result must be the same, else the
		// inputs disagree about the content of some ids (first one wins) and
		// no merge can match both orders; Yjs's mergeUpdates differs there too
		// (testdata/fuzz/FuzzMergeUpdates/4398d4c46bffab13).
		rev := yjs.NewDoc(yjs.WithClientID(5))
		if rev.ApplyUpdate(b, nil) != nil || rev.ApplyUpdate(a, nil) != nil {
			return
		}
		revJSON, revSV := fuzzDocState(rev)
		refJSON, refSV := fuzzDocState(ref)
		if !reflect.DeepEqual(revSV, refSV) || !reflect.DeepEqual(revJSON, refJSON) {
			return
		}
		require.NoError(t, mergeErr, "MergeUpdates of two applicable updates")
		d := yjs.NewDoc(yjs.WithClientID(2))
		require.NoError(t, d.ApplyUpdate(merged, nil), "applying the merge")
		// Inputs can disagree about some ids' content and still give the
		// same document in both orders of applying. A merge then depends
		// on the order of its inputs, in Yjs's mergeUpdates too
		// (testdata/fuzz/FuzzMergeUpdates/6157fa495a9b4532: Yjs's merge of
		// [a, b] drops a map entry, of [b, a] keeps it). Only inputs whose
		// merges agree in both orders are held to sequential apply.
		mergedRev, err := yjs.MergeUpdates([][]byte{b, a})
		require.NoError(t, err, "MergeUpdates of two applicable updates, reversed")
		dr := yjs.NewDoc(yjs.WithClientID(6))
		require.NoError(t, dr.ApplyUpdate(mergedRev, nil), "applying the reversed merge")
		drJSON, drSV := fuzzDocState(dr)
		dJSON, dSV := fuzzDocState(d)
		if !reflect.DeepEqual(drSV, dSV) || !reflect.DeepEqual(drJSON, dJSON) {
			return
		}
		wantJSON, wantSV := fuzzDocState(ref)
		gotJSON, gotSV := fuzzDocState(d)
		require.Equal(t, wantSV, gotSV, "state vector: merge vs sequential apply")
		require.Equal(t, wantJSON, gotJSON, "content: merge vs sequential apply")
	})
}

// FuzzDecodeStateVector: decoding never panics and round-trips.
func FuzzDecodeStateVector(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{1, 5, 10})
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff, 0x0f, 3, 1, 0})
	f.Add([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 1})
	for _, s := range seedUpdates(f) {
		if sv, err := yjs.EncodeStateVectorFromUpdate(s); err == nil {
			f.Add(sv)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		m, err := yjs.DecodeStateVector(data)
		if err != nil {
			return
		}
		m2, err := yjs.DecodeStateVector(yjs.EncodeStateVector(m))
		require.NoError(t, err, "decoding a re-encoded state vector")
		require.Equal(t, m, m2)
		// a decoded state vector is usable against a document
		d := yjs.NewDoc()
		_, err = d.EncodeStateAsUpdate(data)
		require.NoError(t, err, "EncodeStateAsUpdate with a valid state vector")
	})
}
