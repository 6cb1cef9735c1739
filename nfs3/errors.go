package nfs3

import (
	"errors"
	"fmt"
)

var errEmptyHandle = errors.New("empty file handle")

func errPayloadLength(n uint32, placed, max int) error {
	return fmt.Errorf("result of %d bytes but %d placed (limit %d)", n, placed, max)
}
