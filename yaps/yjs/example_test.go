package yjs_test

import (
	"fmt"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

// Two documents exchange updates and converge.
func Example() {
	alice := yjs.NewDoc(yjs.WithClientID(1))
	bob := yjs.NewDoc(yjs.WithClientID(2))

	// forward every local change of alice to bob
	alice.OnUpdate(func(update []byte, origin any) {
		if err := bob.ApplyUpdate(update, "alice"); err != nil {
			panic(err)
		}
	})

	alice.Transact(func(tx *yjs.Transaction) {
		alice.GetText("title").Insert(0, "Hello", nil)
		alice.GetMap("meta").Set("likes", 3)
	}, nil)
	alice.GetText("title").Insert(5, " World", map[string]any{"bold": true})

	title := bob.GetText("title")
	likes, _ := bob.GetMap("meta").Get("likes")
	fmt.Println(title.String(), likes)
	fmt.Println(title.ToDelta())
	// Output:
	// Hello World 3
	// [{"insert":"Hello"} {"insert":" World","attributes":{"bold":true}}]
}

// A server decodes a client's update once: it looks at the clients the
// update writes under, then applies it whole or not at all.
func ExampleDecodeUpdate() {
	client := yjs.NewDoc(yjs.WithClientID(7))
	var update []byte
	client.OnUpdate(func(u []byte, _ any) { update = u })
	client.GetText("t").Insert(0, "hi", nil)

	u := yjs.DecodeUpdate(update)
	if u.Err() != nil {
		panic(u.Err())
	}
	fmt.Println(u.Ends()) // client 7 up to clock 2

	server := yjs.NewDoc()
	applied, err := server.ApplyWhole(u, nil)
	fmt.Println(applied, err, server.GetText("t").String())
	// Output:
	// [{7 2}]
	// true <nil> hi
}
