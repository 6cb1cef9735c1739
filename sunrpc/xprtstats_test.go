package sunrpc

import (
	"strings"
	"testing"
	"time"
)

// TestTCPXprtStatsConnectTime: the connect_time field of the "xprt: tcp"
// line is in seconds, as the kernel prints it for every transport.
func TestTCPXprtStatsConnectTime(t *testing.T) {
	tr := NewTCP(TCPConfig{Addr: "127.0.0.1:1"})
	defer tr.Close()
	tr.stats.ConnectTime.Add(int64(2500 * time.Millisecond))
	// tcp srcport bind_count connect_count connect_time ...
	f := strings.Fields(tr.XprtStats())
	if len(f) < 5 || f[0] != "tcp" {
		t.Fatalf("xprt line %q", tr.XprtStats())
	}
	if f[4] != "2" {
		t.Errorf("connect_time %s after 2.5 s of connecting, want 2 (seconds)", f[4])
	}
}
