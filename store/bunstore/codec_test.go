package bunstore

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

func TestYapCodec(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	p, title, loc := yaps.PriorityUrgent, "", "Room ☃"
	for _, y := range []*yaps.Yap{
		{ID: "a", ListRef: "l", Kind: yaps.KindTask, CreatedAt: at, UpdatedAt: at, Content: "x", Status: yaps.StatusOpen,
			Priority: &p, DueAt: &at, Tags: []string{"", "b"}},
		{ID: "b", ListRef: "l", Kind: yaps.KindNote, CreatedAt: at, UpdatedAt: at, Title: &title, Body: "b\x00", Tags: []string{}},
		{ID: "c", ListRef: "l", Kind: yaps.KindEvent, CreatedAt: at, UpdatedAt: at, Title: &loc, StartsAt: &at, EndsAt: &at,
			Location: &loc, DeletedAt: &at},
	} {
		data := encodeYap(y)
		got, err := decodeYap("l", y.ID, at.UnixMilli(), msPtr(y.DeletedAt), data)
		require.NoError(t, err)
		require.Equal(t, y, got)
		// Every truncation is an error, never a panic or a silent success.
		for n := range len(data) {
			_, err := decodeYap("l", y.ID, 0, sql.NullInt64{}, data[:n])
			require.Error(t, err, "truncated to %d of %d bytes", n, len(data))
		}
	}
}
