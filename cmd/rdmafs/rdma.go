package main

import (
	"fmt"

	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/ibverbs"
	"github.com/rdmafs/rdmafs/verbs/soft"
	"github.com/rdmafs/rdmafs/xprtrdma"
)

// defaultRDMAPort is where NFS over RDMA listens unless port= says
// otherwise (RFC 8267).
const defaultRDMAPort = 20049

// provider returns the verbs provider the provider= option names.
func provider(p mountopts.Provider) (verbs.Provider, error) {
	switch p {
	case mountopts.ProviderSoft:
		return soft.New(), nil
	case mountopts.ProviderIBVerbs:
		return ibverbs.Provider{}, nil
	}
	return nil, fmt.Errorf("provider=%v is not built in", p)
}

// memReg converts the memreg= option.
func memReg(m mountopts.MemReg) xprtrdma.MemReg {
	switch m {
	case mountopts.MemRegRegister:
		return xprtrdma.MemRegRegister
	case mountopts.MemRegPersistent:
		return xprtrdma.MemRegPersistent
	}
	return xprtrdma.MemRegMW
}

// rdmaChunkBuffers is how many chunk buffers (of the largest READ or
// WRITE each) an RDMA mount registers: READ data lands in them and
// write-behind fills them.
const rdmaChunkBuffers = 128
