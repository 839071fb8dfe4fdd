package bunstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

// Each migration and the row that records it commit together. bun's
// Migrator commits a .tx.up.sql file and only then, outside that
// transaction, records it in yaps_migrations: a process stopped between the
// two (a signal during start-up, a dropped connection) left the schema
// changed but the migration unrecorded, and since a migration cannot run
// twice (CREATE TABLE ...), the store never opened again. So bun finds and
// orders the files and reads what was applied; applyMigrations runs them.

// migrationQueries reads the statements of every *.tx.up.sql file in dir,
// by migration (Migration.String: version_comment), split where a line
// reads --bun:split, as bun's own runner splits them.
func migrationQueries(dir fs.FS) (map[string][]string, error) {
	files, err := fs.Glob(dir, "*.tx.up.sql")
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(files))
	for _, name := range files {
		raw, err := fs.ReadFile(dir, name)
		if err != nil {
			return nil, err
		}
		var queries []string
		var q []byte
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			line := sc.Bytes()
			if d, ok := bytes.CutPrefix(line, []byte("--bun:")); ok {
				if string(bytes.TrimSpace(d)) != "split" {
					return nil, fmt.Errorf("%s: unknown directive %q", name, line)
				}
				if len(q) > 0 {
					queries, q = append(queries, string(q)), nil
				}
				continue
			}
			if len(bytes.TrimSpace(line)) > 0 {
				q = append(append(q, line...), '\n')
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(q) > 0 {
			queries = append(queries, string(q))
		}
		out[name[:len(name)-len(".tx.up.sql")]] = queries
	}
	return out, nil
}

// errNewerSchema: the database holds a migration this build does not know.
var errNewerSchema = errors.New("the database was migrated by a newer version of yaps")

// applyMigrations runs the migrations m has not applied yet, in order, each
// in one transaction with the row that records it, skipping one that
// another process applied in the meantime.
//
// A database that holds a migration this build does not know was opened
// by a newer build, whose rows this one may misread (an update row holding
// several updates, updaterows.go): it is refused.
func (s *Store) applyMigrations(ctx context.Context, m *migrate.Migrator, queries map[string][]string) error {
	unknown, err := m.MissingMigrations(ctx)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w (migration %s); run that version or a later one", errNewerSchema, unknown[0].Name)
	}
	all, err := m.MigrationsWithStatus(ctx)
	if err != nil {
		return err
	}
	if s.afterMigrationStatus != nil {
		s.afterMigrationStatus()
	}
	group := all.LastGroupID() + 1
	for _, mig := range all.Unapplied() {
		qs, ok := queries[mig.String()]
		if !ok {
			return fmt.Errorf("%s: no .tx.up.sql file", mig.String())
		}
		mig.GroupID = group
		err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			// Another process may have applied it since the status was
			// read; the transaction holds the write lock (SQLite's BEGIN
			// IMMEDIATE), so what it reads now stays true until commit. A
			// migration that can run twice (a table rebuilt under a new
			// name) would otherwise run again after later ones and undo
			// them.
			done, err := tx.NewSelect().TableExpr(migrationsTable).Where("name = ?", mig.Name).Exists(ctx)
			if err != nil || done {
				return err
			}
			for _, q := range qs {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return err
				}
			}
			_, err = tx.NewInsert().Model(&mig).ModelTableExpr(migrationsTable).Exec(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", mig.String(), err)
		}
	}
	return nil
}
