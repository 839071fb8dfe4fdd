package yaps_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// idemClient retries POST /lists and POST /lists/{ref}/yaps with fixed
// Idempotency-Keys and reports what each answer names: the created list's
// ref or yap's id, or the replayed one (replayed true).
type idemClient struct {
	e     *env
	owner *yaps.Actor
}

func (c idemClient) createList(t *testing.T, body string) (ref string, replayed bool) {
	t.Helper()
	in := yaps.CreateListInput{Title: yaps.Set(body), IdempotencyKey: "list-key", RequestHash: hash(body), ClientIP: "1.1.1.1"}
	out, err := c.e.svc.CreateList(c.e.ctx, in)
	require.NoError(t, err)
	if out.Replay == nil {
		return out.List.Ref, false
	}
	require.Nil(t, out.List)
	var j yaps.CreatedListJSON
	require.NoError(t, json.Unmarshal(out.Replay.Body, &j))
	return j.Ref, true
}

func (c idemClient) createYap(t *testing.T, body string) (id string, replayed bool) {
	t.Helper()
	y, rep, err := c.e.svc.CreateYap(c.e.ctx, c.owner, yaps.KindTask, task(body), "yap-key", hash(body))
	require.NoError(t, err)
	if rep == nil {
		return y.ID, false
	}
	require.Nil(t, y)
	var j map[string]any
	require.NoError(t, json.Unmarshal(rep.Body, &j))
	return j["id"].(string), true
}

// TestIdempotencyRetention: a retry within IdempotencyRetention replays the
// first answer; after it the key is new again (a new list or yap, whatever
// the body), whether or not the prune deleted the record yet, and the new
// answer is what the key replays from then on.
func TestIdempotencyRetention(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retention  time.Duration // 0: the default, 24h
		wait       time.Duration // between the first request and the retry
		prune      bool          // PruneIdempotency runs before the retry
		retryBody  string        // "" repeats the first body
		wantReplay bool
		wantCode   string // the retry's error code, if any
	}{
		{name: "Immediately", wantReplay: true},
		{name: "WithinRetention", wait: 23 * time.Hour, wantReplay: true},
		{name: "WithinRetentionPruned", wait: 23 * time.Hour, prune: true, wantReplay: true},
		{name: "AtRetention", wait: 24 * time.Hour, wantReplay: true},
		{name: "WithinRetentionOtherBody", wait: 23 * time.Hour, retryBody: "other", wantCode: yaps.EINVALID},
		{name: "AfterRetention", wait: 24*time.Hour + time.Millisecond},
		{name: "AfterRetentionPruned", wait: 25 * time.Hour, prune: true},
		{name: "AfterRetentionOtherBody", wait: 25 * time.Hour, retryBody: "other"},
		{name: "CustomRetention", retention: time.Hour, wait: time.Hour + time.Second},
		{name: "CustomRetentionPruned", retention: time.Hour, wait: 2 * time.Hour, prune: true},
		{name: "KeptForever", retention: -1, wait: 400 * 24 * time.Hour, prune: true, wantReplay: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *yaps.Config) { c.IdempotencyRetention = tc.retention })
			c := idemClient{e: e, owner: e.list()}
			firstList, replayed := c.createList(t, "first")
			require.False(t, replayed)
			firstYap, replayed := c.createYap(t, "first")
			require.False(t, replayed)

			e.clock.Advance(tc.wait)
			if tc.prune {
				_, err := e.svc.PruneIdempotency(e.ctx)
				require.NoError(t, err)
			}
			body := tc.retryBody
			if body == "" {
				body = "first"
			}
			if tc.wantCode != "" {
				_, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{Title: yaps.Set(body),
					IdempotencyKey: "list-key", RequestHash: hash(body), ClientIP: "1.1.1.1"})
				requireCode(t, tc.wantCode, err)
				_, _, err = e.svc.CreateYap(e.ctx, c.owner, yaps.KindTask, task(body), "yap-key", hash(body))
				requireCode(t, tc.wantCode, err)
				return
			}
			list, replayed := c.createList(t, body)
			require.Equal(t, tc.wantReplay, replayed, "list replayed")
			yap, replayed := c.createYap(t, body)
			require.Equal(t, tc.wantReplay, replayed, "yap replayed")
			if tc.wantReplay {
				require.Equal(t, firstList, list)
				require.Equal(t, firstYap, yap)
				return
			}
			require.NotEqual(t, firstList, list)
			require.NotEqual(t, firstYap, yap)
			page, err := e.svc.ListYaps(e.ctx, c.owner, "", 0, false)
			require.NoError(t, err)
			require.Len(t, page.Yaps, 2, "the retry after the retention created a yap")

			// The key now replays the new answer.
			again, replayed := c.createList(t, body)
			require.True(t, replayed)
			require.Equal(t, list, again)
			again, replayed = c.createYap(t, body)
			require.True(t, replayed)
			require.Equal(t, yap, again)
		})
	}
}

// TestPruneIdempotency: PruneIdempotency deletes exactly the records older
// than the retention (lists' and yaps'), and the young ones still replay.
func TestPruneIdempotency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retention  time.Duration // 0: the default, 24h
		ages       []time.Duration
		wantPruned int
	}{
		{name: "Default", ages: []time.Duration{72 * time.Hour, 25 * time.Hour, 24*time.Hour + time.Millisecond,
			24 * time.Hour, time.Hour, 0}, wantPruned: 3},
		{name: "NothingOld", ages: []time.Duration{23 * time.Hour, time.Minute}, wantPruned: 0},
		{name: "Custom", retention: time.Hour, ages: []time.Duration{3 * time.Hour, 2 * time.Hour,
			30 * time.Minute}, wantPruned: 2},
		{name: "KeptForever", retention: -1, ages: []time.Duration{1000 * time.Hour, time.Hour}, wantPruned: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *yaps.Config) { c.IdempotencyRetention = tc.retention })
			owner := e.list()
			retention := tc.retention
			if retention == 0 {
				retention = yaps.DefaultIdempotencyRetention
			}
			type record struct {
				in    yaps.CreateListInput // a list's record, or
				yapIn string               // a yap's key
				young bool
				made  string // the list ref or yap id
			}
			// ages are oldest first: create each record when it is that old
			// before the prune, half of them lists', half yaps'.
			var recs []*record
			for i, age := range tc.ages {
				if i > 0 {
					e.clock.Advance(tc.ages[i-1] - age)
				}
				r := &record{young: retention < 0 || age <= retention}
				key := string(rune('a' + i))
				if i%2 == 0 {
					r.in = yaps.CreateListInput{IdempotencyKey: key, RequestHash: hash(key), ClientIP: "1.1.1.1"}
					out, err := e.svc.CreateList(e.ctx, r.in)
					require.NoError(t, err)
					r.made = out.List.Ref
				} else {
					r.yapIn = key
					y, _, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task(key), key, hash(key))
					require.NoError(t, err)
					r.made = y.ID
				}
				recs = append(recs, r)
			}
			e.clock.Advance(tc.ages[len(tc.ages)-1])

			n, err := e.svc.PruneIdempotency(e.ctx)
			require.NoError(t, err)
			require.Equal(t, tc.wantPruned, n)
			n, err = e.svc.PruneIdempotency(e.ctx)
			require.NoError(t, err)
			require.Zero(t, n, "no record older than the retention is left")
			// The young records were kept: they still replay. The pruned
			// keys are new again.
			for _, r := range recs {
				var made string
				var replayed bool
				if r.yapIn == "" {
					out, err := e.svc.CreateList(e.ctx, r.in)
					require.NoError(t, err)
					if replayed = out.Replay != nil; replayed {
						var j yaps.CreatedListJSON
						require.NoError(t, json.Unmarshal(out.Replay.Body, &j))
						made = j.Ref
					} else {
						made = out.List.Ref
					}
				} else {
					k := r.yapIn
					y, rep, err := e.svc.CreateYap(e.ctx, owner, yaps.KindTask, task(k), k, hash(k))
					require.NoError(t, err)
					if replayed = rep != nil; replayed {
						var j map[string]any
						require.NoError(t, json.Unmarshal(rep.Body, &j))
						made = j["id"].(string)
					} else {
						made = y.ID
					}
				}
				require.Equal(t, r.young, replayed, "record %q replayed", r.made)
				require.Equal(t, r.young, made == r.made)
			}
		})
	}
}

// TestIdempotencyPrunedInBackground: the background ticker (PurgeInterval)
// deletes expired records and keeps young ones.
func TestIdempotencyPrunedInBackground(t *testing.T) {
	t.Parallel()
	rec := &recordingStore{}
	e := newEnv(t, func(c *yaps.Config) {
		rec.Store, c.Store = c.Store, rec
		c.PurgeInterval = 10 * time.Millisecond
	})
	create := func(key string) *yaps.IdempotencyRecord {
		_, err := e.svc.CreateList(e.ctx, yaps.CreateListInput{IdempotencyKey: key, RequestHash: hash(key), ClientIP: "1.1.1.1"})
		require.NoError(t, err)
		return rec.records[len(rec.records)-1]
	}
	old := create("old")
	e.clock.Advance(25 * time.Hour)
	young := create("young")
	require.Eventually(t, func() bool {
		_, err := e.store.Idempotency(e.ctx, old.Scope, old.Key)
		return yaps.IsCode(err, yaps.ENOTFOUND)
	}, 10*time.Second, 10*time.Millisecond)
	_, err := e.store.Idempotency(e.ctx, young.Scope, young.Key)
	require.NoError(t, err)
}
