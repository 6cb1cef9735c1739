package lockd

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The state directory keeps what a restarted server needs to know, as
// statd keeps /var/lib/nfs/statd (state, sm/):
//
//	state    the NSM state number, in decimal: odd while the server is up;
//	         each start makes it the next odd number
//	clients  one line per client host that holds locks: its caller_name,
//	         quoted as Go quotes strings, a space, its address
type stateDir struct {
	dir      string
	nsmState int32
	clients  []recordedHost // as the previous run left them
}

type recordedHost struct {
	name string
	addr netip.Addr
}

// openStateDir creates dir if need be, bumps the state number and reads
// the clients the previous run recorded.
func openStateDir(dir string) (*stateDir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lockd: state directory: %w", err)
	}
	st := &stateDir{dir: dir}
	if b, err := os.ReadFile(filepath.Join(dir, "state")); err == nil {
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("lockd: %s: %w", filepath.Join(dir, "state"), err)
		}
		st.nsmState = int32(n)
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("lockd: %w", err)
	}
	st.nsmState++
	if st.nsmState%2 == 0 {
		st.nsmState++
	}
	if st.nsmState < 0 { // wrapped: start again, as statd does
		st.nsmState = 1
	}
	if err := writeFileSync(filepath.Join(dir, "state"), []byte(strconv.Itoa(int(st.nsmState))+"\n")); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "clients"))
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("lockd: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name, err := strconv.Unquote(line[:i])
		if err != nil {
			continue
		}
		addr, _ := netip.ParseAddr(line[i+1:])
		st.clients = append(st.clients, recordedHost{name: name, addr: addr})
	}
	return st, nil
}

// saveClients replaces the recorded clients with list.
func (st *stateDir) saveClients(list []recordedHost) error {
	var b bytes.Buffer
	for _, h := range list {
		addr := "-"
		if h.addr.IsValid() {
			addr = h.addr.String()
		}
		fmt.Fprintf(&b, "%s %s\n", strconv.Quote(h.name), addr)
	}
	return writeFileSync(filepath.Join(st.dir, "clients"), b.Bytes())
}

// writeFileSync replaces path with data, whole or not at all, and on disk
// when it returns.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("lockd: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("lockd: writing %s: %w", path, err)
	}
	return nil
}
