package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

// The host's own types, named like the list service's.
type (
	Account    struct{ Email string }
	List       struct{ Items []string }
	Problem    struct{ Why string }
	Permission struct{ Grant string }
)

type hostIn[T any] struct{ Body T }
type hostOut[T any] struct{ Body T }

func hostOp[T any](api huma.API, id string) {
	huma.Register(api, huma.Operation{OperationID: id, Method: http.MethodPost, Path: "/host/" + id},
		func(_ context.Context, in *hostIn[T]) (*hostOut[T], error) { return &hostOut[T]{Body: in.Body}, nil })
}

// Registered on a host's Huma API, the list service's schemas are named
// Yaps…, so types of the host named List, Account or Problem, registered
// before or after it, meet no clash (Huma panics on two types of one
// name); the document's references all resolve, and the service answers.
// An API of the service's own (Mount) keeps the plain names.
func TestRegisterBesideHostTypes(t *testing.T) {
	t.Parallel()
	svc, err := yaps.NewService(yaps.Config{Store: memstore.New(), PurgeInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	mux := http.NewServeMux()
	api := humago.NewWithPrefix(mux, "/api/v1", huma.DefaultConfig("Host", "1.0.0"))
	hostOp[Account](api, "account")
	hostOp[List](api, "list")
	require.NotPanics(t, func() { httpapi.Register(api, svc, httpapi.Config{}) })
	require.NotPanics(t, func() {
		hostOp[Problem](api, "problem")
		hostOp[Permission](api, "permission")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	res, err := srv.Client().Get(srv.URL + "/api/v1/openapi.json")
	require.NoError(t, err)
	var d oaDoc
	require.NoError(t, json.NewDecoder(res.Body).Decode(&d))
	res.Body.Close()
	schemas := d.schemas()
	for _, name := range []string{"Account", "List", "Problem", "Permission", "YapsList", "YapsProblem", "YapsCreatedList", "YapsYapPage", "YapsTaskYap"} {
		require.Contains(t, schemas, name)
	}
	require.Contains(t, schemas["List"].(map[string]any)["properties"], "Items", "the host's List is the host's")
	require.Contains(t, schemas["YapsList"].(map[string]any)["properties"], "ref")
	checkRefsAndSecurity(t, d)
	created := d.op(t, "POST", "/lists")["responses"].(map[string]any)["201"].(map[string]any)
	require.Equal(t, "#/components/schemas/YapsCreatedList", created["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)["$ref"])

	res, err = srv.Client().Post(srv.URL+"/api/v1/lists", "application/json", strings.NewReader(`{"title":"t"}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode, "%s", b)
	res, err = srv.Client().Get(srv.URL + "/api/v1/lists/nope")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))

	own := httpapi.Mount(http.NewServeMux(), svc, httpapi.Config{})
	m := own.OpenAPI().Components.Schemas.Map()
	require.Contains(t, m, "List")
	require.NotContains(t, m, "YapsList")
}
