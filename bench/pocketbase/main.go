// Command pocketbase is the peer server for `yaps bench http`: stock
// PocketBase (v0.39.11, embedded pure-Go SQLite via modernc.org/sqlite) with
// two collections that hold the same records as Yaps, created at startup
// through PocketBase's Go API:
//
//   - lists: title, kind, archivedAt, created, updated
//   - yaps:  list (relation to lists), kind, content, status, priority,
//     dueAt, tags, deletedAt, created, updated; indexed on (list, created, id)
//     like the Yaps projection, so "50 yaps of one list in chronological
//     order" is an index range scan on both sides.
//
// All API rules are "" (public): PocketBase does no auth work per request,
// while Yaps hashes and checks a permission code on every request. That is
// the cheapest configuration a PocketBase user could pick, i.e. it favours
// the peer.
//
// It lives in its own module (this directory's go.mod) so the main Yaps
// module never depends on PocketBase; `go test ./...` at the repo root does
// not descend into it.
//
// Usage (the bench passes these):
//
//	pocketbase serve --http 127.0.0.1:PORT --dir DATA_DIR
//
// PocketBase's request log (one row per request in auxiliary.db, on by
// default) stays on unless YAPS_BENCH_PB_LOGS=off.
package main

import (
	"log"
	"os"

	"github.com/pocketbase/pocketbase"
	"github.com/pocketbase/pocketbase/core"
	"github.com/pocketbase/pocketbase/tools/types"
)

func main() {
	// Not pocketbase.New: it turns dev mode on (every SQL statement logged,
	// the writer's included) for any binary under os.TempDir(), taking it
	// for `go run`, and the bench builds the peer there.
	app := pocketbase.NewWithConfig(pocketbase.Config{DefaultDev: false})
	app.OnServe().BindFunc(func(e *core.ServeEvent) error {
		if err := ensureCollections(e.App); err != nil {
			return err
		}
		if os.Getenv("YAPS_BENCH_PB_LOGS") == "off" {
			// PocketBase's request log (a row per request in
			// auxiliary.db) is on by default; MaxDays 0 turns it off.
			s := e.App.Settings()
			s.Logs.MaxDays = 0
			if err := e.App.Save(s); err != nil {
				return err
			}
		}
		return e.Next()
	})
	if err := app.Start(); err != nil {
		log.Fatal(err)
	}
}

// public makes every record rule public (no auth) on c.
func public(c *core.Collection) {
	c.ListRule = types.Pointer("")
	c.ViewRule = types.Pointer("")
	c.CreateRule = types.Pointer("")
	c.UpdateRule = types.Pointer("")
	c.DeleteRule = types.Pointer("")
}

func ensureCollections(app core.App) error {
	lists, err := app.FindCollectionByNameOrId("lists")
	if err != nil {
		lists = core.NewBaseCollection("lists")
		public(lists)
		lists.Fields.Add(
			&core.TextField{Name: "title", Max: 200},
			&core.SelectField{Name: "kind", Values: []string{"task", "note", "event"}, MaxSelect: 1},
			&core.DateField{Name: "archivedAt"},
			&core.AutodateField{Name: "created", OnCreate: true},
			&core.AutodateField{Name: "updated", OnCreate: true, OnUpdate: true},
		)
		if err := app.Save(lists); err != nil {
			return err
		}
	}
	if _, err := app.FindCollectionByNameOrId("yaps"); err == nil {
		return nil
	}
	yaps := core.NewBaseCollection("yaps")
	public(yaps)
	yaps.Fields.Add(
		&core.RelationField{Name: "list", CollectionId: lists.Id, MaxSelect: 1, Required: true, CascadeDelete: true},
		&core.SelectField{Name: "kind", Values: []string{"task", "note", "event"}, MaxSelect: 1, Required: true},
		&core.TextField{Name: "content", Max: 1000},
		&core.SelectField{Name: "status", Values: []string{"open", "in_progress", "done", "cancelled"}, MaxSelect: 1},
		&core.SelectField{Name: "priority", Values: []string{"low", "medium", "high", "urgent"}, MaxSelect: 1},
		&core.DateField{Name: "dueAt"},
		&core.JSONField{Name: "tags"},
		&core.DateField{Name: "deletedAt"},
		&core.AutodateField{Name: "created", OnCreate: true},
		&core.AutodateField{Name: "updated", OnCreate: true, OnUpdate: true},
	)
	yaps.AddIndex("idx_yaps_list_created", false, "`list`, `created`, `id`", "")
	return app.Save(yaps)
}
