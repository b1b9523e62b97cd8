package tcp

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
)

// bootKey is the bootstrap key of a PE's record.
const bootKey = "symheap.tcp"

// record is what a PE publishes: where to dial it, in order of
// preference, and the sizes of its regions (for the origin's checks).
type record struct {
	Addrs   []string `json:"addrs"`
	Regions []uint64 `json:"regions"`
}

func (r record) encode() []byte {
	b, _ := json.Marshal(r) // strings and numbers: cannot fail
	return b
}

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("malformed record %q: %v", b, err)
	}
	if len(r.Addrs) == 0 {
		return r, fmt.Errorf("record %q has no address", b)
	}
	return r, nil
}

// listenAddr is where a PE listens: only on ip if set
// (SYMHEAP_TCP_ADDR), else on every interface.
func listenAddr(ip string) string {
	if ip == "" {
		return ":0"
	}
	return net.JoinHostPort(ip, "0")
}

// candidates lists the addresses a peer may reach port at: ip alone if
// set, else the machine's non-loopback IPv4 addresses, then its global
// IPv6 ones, then loopback (right only for a peer on this machine, and
// refused by the handshake anywhere else).
func candidates(ip string, port int) []string {
	p := strconv.Itoa(port)
	if ip != "" {
		return []string{net.JoinHostPort(ip, p)}
	}
	var v4, v6, lo []string
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			switch ipa := n.IP; {
			case ipa.IsLoopback():
				lo = append(lo, net.JoinHostPort(ipa.String(), p))
			case ipa.IsLinkLocalUnicast() || ipa.IsMulticast() || ipa.IsUnspecified():
			case ipa.To4() != nil:
				v4 = append(v4, net.JoinHostPort(ipa.String(), p))
			default:
				v6 = append(v6, net.JoinHostPort(ipa.String(), p))
			}
		}
	}
	out := append(append(v4, v6...), lo...)
	if len(out) == 0 {
		out = []string{net.JoinHostPort("127.0.0.1", p)}
	}
	return out
}
