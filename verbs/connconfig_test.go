package verbs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestConnConfigCheck: a configuration beyond the device's limits is
// refused, naming the field, and a valid one gets its defaults.
func TestConnConfigCheck(t *testing.T) {
	caps := Caps{MaxQPWR: 100, MaxSGE: 4, MaxCQE: 150}
	outOfRange := func(what string, v, limit int) error {
		return fmt.Errorf("%s %d (at most %d): %w", what, v, limit, syscall.EINVAL)
	}
	for _, tc := range []struct {
		cfg  ConnConfig
		want string
	}{
		{ConnConfig{SendDepth: 101}, "SendDepth 101 (at most 100)"},
		{ConnConfig{RecvDepth: -1}, "RecvDepth -1 (at most 100)"},
		{ConnConfig{MaxSendSGE: 5}, "MaxSendSGE 5 (at most 4)"},
		{ConnConfig{MaxRecvSGE: 5}, "MaxRecvSGE 5 (at most 4)"},
		{ConnConfig{CQDepth: 151}, "CQDepth 151 (at most 150)"},
		{ConnConfig{SendDepth: 100, RecvDepth: 51}, "SendDepth+RecvDepth (the CQ's depth) 151 (at most 150)"},
	} {
		_, err := tc.cfg.Check(caps, outOfRange)
		if err == nil || !errors.Is(err, syscall.EINVAL) || err.Error() != tc.want+": "+syscall.EINVAL.Error() {
			t.Errorf("%+v: error %v, want %s", tc.cfg, err, tc.want)
		}
	}

	pdata := []byte("hello")
	got, err := ConnConfig{SendDepth: 100, RecvDepth: 50, PrivateData: pdata}.Check(caps, outOfRange)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxSendSGE != 1 || got.MaxRecvSGE != 1 || got.CQDepth != 150 || got.Timeout != DefaultConnTimeout {
		t.Errorf("defaults: %+v", got)
	}
	pdata[0] = 'j'
	if string(got.PrivateData) != "hello" {
		t.Errorf("private data %q: not copied", got.PrivateData)
	}
	if got, _ := (ConnConfig{CQDepth: 7, Timeout: 1}).Check(caps, outOfRange); got.CQDepth != 7 || got.Timeout != 1 {
		t.Errorf("given values changed: %+v", got)
	}
}
