package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

// Mount the API on a host mux beside the host's own routes, create a list
// and read it back with its owner code.
func ExampleMount() {
	svc, err := yaps.NewService(yaps.Config{Store: memstore.New(), PurgeInterval: -1})
	if err != nil {
		panic(err)
	}
	defer svc.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	httpapi.Mount(mux, svc, httpapi.Config{Prefix: "/api/v1"})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	res, err := http.Post(srv.URL+"/api/v1/lists", "application/json", strings.NewReader(`{"title": "Groceries", "kind": "tasks"}`))
	if err != nil {
		panic(err)
	}
	var created struct {
		Ref       string `json:"ref"`
		OwnerCode string `json:"ownerCode"`
	}
	_ = json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	fmt.Println("POST /lists:", res.StatusCode)

	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/lists/"+created.Ref, nil)
	req.Header.Set("Authorization", "Bearer "+created.OwnerCode)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	var got struct {
		List struct {
			Title string `json:"title"`
			Kind  string `json:"kind"`
		} `json:"list"`
		Role string `json:"role"`
	}
	_ = json.NewDecoder(res.Body).Decode(&got)
	res.Body.Close()
	fmt.Println("GET /lists/{ref}:", res.StatusCode, got.List.Title, got.List.Kind, got.Role)

	res, err = http.Get(srv.URL + "/api/v1/lists/" + created.Ref)
	if err != nil {
		panic(err)
	}
	res.Body.Close()
	fmt.Println("without a code:", res.StatusCode, res.Header.Get("Content-Type"))
	// Output:
	// POST /lists: 201
	// GET /lists/{ref}: 200 Groceries task owner
	// without a code: 401 application/problem+json
}
