package verbs

import "time"

// DefaultConnTimeout is the ConnConfig.Timeout of a zero Timeout.
const DefaultConnTimeout = 10 * time.Second

// Check validates cfg against a device's caps, as ibv_create_qp would, and
// returns it with what its zero fields mean filled in: one SGE each way, a
// completion queue of SendDepth+RecvDepth, DefaultConnTimeout; PrivateData
// is copied, so that the caller may reuse its slice. Both providers check
// a connection's configuration with it before making anything.
//
// outOfRange makes the error for the first field outside 0..limit (what
// names the field, v is its value): the provider names its verb and
// device there.
func (cfg ConnConfig) Check(caps Caps, outOfRange func(what string, v, limit int) error) (ConnConfig, error) {
	switch {
	case cfg.SendDepth < 0 || cfg.SendDepth > caps.MaxQPWR:
		return cfg, outOfRange("SendDepth", cfg.SendDepth, caps.MaxQPWR)
	case cfg.RecvDepth < 0 || cfg.RecvDepth > caps.MaxQPWR:
		return cfg, outOfRange("RecvDepth", cfg.RecvDepth, caps.MaxQPWR)
	case cfg.MaxSendSGE < 0 || cfg.MaxSendSGE > caps.MaxSGE:
		return cfg, outOfRange("MaxSendSGE", cfg.MaxSendSGE, caps.MaxSGE)
	case cfg.MaxRecvSGE < 0 || cfg.MaxRecvSGE > caps.MaxSGE:
		return cfg, outOfRange("MaxRecvSGE", cfg.MaxRecvSGE, caps.MaxSGE)
	case cfg.CQDepth < 0 || cfg.CQDepth > caps.MaxCQE:
		return cfg, outOfRange("CQDepth", cfg.CQDepth, caps.MaxCQE)
	case cfg.CQDepth == 0 && cfg.SendDepth+cfg.RecvDepth > caps.MaxCQE:
		// A smaller CQ could overrun, which breaks the connection.
		return cfg, outOfRange("SendDepth+RecvDepth (the CQ's depth)", cfg.SendDepth+cfg.RecvDepth, caps.MaxCQE)
	}
	cfg.MaxSendSGE = max(cfg.MaxSendSGE, 1)
	cfg.MaxRecvSGE = max(cfg.MaxRecvSGE, 1)
	if cfg.CQDepth == 0 {
		cfg.CQDepth = cfg.SendDepth + cfg.RecvDepth
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultConnTimeout
	}
	cfg.PrivateData = append([]byte(nil), cfg.PrivateData...)
	return cfg, nil
}
