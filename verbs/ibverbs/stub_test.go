//go:build !cgo || !linux

package ibverbs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/ibverbs"
)

func TestStub(t *testing.T) {
	_, err := ibverbs.Provider{}.Open(context.Background(), "", "")
	if !errors.Is(err, verbs.ErrNoProvider) || !strings.Contains(err.Error(), "without cgo") {
		t.Fatalf("Open without cgo: %v", err)
	}
}
