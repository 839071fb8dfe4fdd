package httpapi_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcurrentWrites: parallel writers on one list all succeed (no 5xx,
// no lost yap) and the list reads back every yap.
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ref, owner := e.newList(nil)
		y := e.addYap(ref, owner, task("shared"))
		const n = 16
		var wg sync.WaitGroup
		statuses := make(chan int, 2*n)
		for i := range n {
			wg.Add(2)
			go func() {
				defer wg.Done()
				r := e.do(req{Method: "POST", Path: "/lists/" + ref + "/yaps", Code: owner, Body: task(fmt.Sprintf("item %d", i))})
				statuses <- r.Status
			}()
			go func() {
				defer wg.Done()
				r := e.do(req{Method: "PATCH", Path: "/lists/" + ref + "/yaps/" + y["id"].(string), Code: owner, Body: map[string]any{"content": fmt.Sprintf("v%d", i)}})
				statuses <- r.Status
			}()
		}
		wg.Wait()
		close(statuses)
		for s := range statuses {
			require.Contains(t, []int{http.StatusCreated, http.StatusOK}, s)
		}
		r := expect(t, e.get("/lists/"+ref+"/yaps?limit=200", owner), http.StatusOK)
		require.Len(t, r.JSON["yaps"], n+1)
	})
}
