package yjs

import "testing"

// HasChanges agrees with whether update observers get an update.
func TestTransactionHasChanges(t *testing.T) {
	src := NewDoc()
	var ups [][]byte
	src.OnUpdate(func(u []byte, _ any) { ups = append(ups, u) })
	txt := src.GetText("t")
	txt.Insert(0, "hello", nil)
	txt.Delete(1, 2)

	dst := NewDoc()
	for round := 0; round < 2; round++ {
		for i, u := range ups {
			var has, got bool
			unA := dst.OnAfterTransaction(func(tx *Transaction) { has = tx.HasChanges() })
			unU := dst.OnUpdate(func([]byte, any) { got = true })
			if err := dst.ApplyUpdate(u, nil); err != nil {
				t.Fatal(err)
			}
			unA()
			unU()
			if has != got {
				t.Fatalf("round %d update %d: HasChanges %v, update emitted %v", round, i, has, got)
			}
			if want := round == 0; has != want {
				t.Fatalf("round %d update %d: HasChanges %v, want %v", round, i, has, want)
			}
		}
	}
}
