package memstore_test

import (
	"testing"

	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) yaps.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
