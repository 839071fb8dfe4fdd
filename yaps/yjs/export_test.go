package yjs

// RightOriginNotRight reports whether update holds an item whose origin and
// right origin both fall inside one struct of the update, the right origin
// at or before the origin. Yjs never writes one (a right origin is the
// neighbour an item was inserted before), and where it lands depends on
// how the update cuts that struct: Yjs's getMissing, like ours, resolves
// the origin first and then cuts the same struct again at the right origin.
// A re-encoding cuts structs differently, so the content may change; Yjs
// 13.6 does exactly what we do on
// testdata/fuzz/FuzzApplyUpdate/862fd3de6c042176 (INTEROP_FINDINGS.md).
// FuzzApplyUpdate excuses such input. Input that does not decode reports
// false.
func RightOriginNotRight(update []byte) bool {
	du, err := decodeUpdateRaw(update)
	if err != nil {
		return false
	}
	for _, b := range du.blocks {
		for _, r := range b.refs {
			it := r.it
			if !it.hasOrigin() || !it.hasRightOrigin() || it.origin.client != it.rightOrigin.client || it.rightOrigin.clock > it.origin.clock {
				continue
			}
			for _, ob := range du.blocks {
				if ob.client != it.origin.client {
					continue
				}
				for _, s := range ob.refs {
					if s.it.id.clock <= it.rightOrigin.clock && it.origin.clock < s.it.id.clock+s.it.length {
						return true
					}
				}
			}
		}
	}
	return false
}

// PlaceAll finds the place of every struct of d with one placer, as
// InsertedUnder does for a transaction's structs, and returns how many
// parents it walked.
func PlaceAll(d *Doc) (places map[[2]string]int, steps int) {
	var p placer
	places = map[[2]string]int{}
	for _, cs := range d.store.clients {
		for i := 0; i < cs.len(); i++ {
			if pl := p.of(cs.at(i)); pl.ok {
				places[[2]string{pl.root, pl.key}]++
			}
		}
	}
	return places, p.steps
}
