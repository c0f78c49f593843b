package wire

import (
	"fmt"
	"net"
	"strconv"
)

// CheckHostPort checks an address of a node, a peer or a ZooKeeper server:
// "host:port" whose host is an IP address or a host name (letters, digits,
// '.', '-', '_') and whose port is a decimal number in 1..65535. It is the
// one check both sides of the wire make, so that an address read from
// ZooKeeper or a flag cannot turn into another URL.
func CheckHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", s, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Errorf("%q: port %q is not a number in 1..65535", s, port)
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c == '.' || c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return fmt.Errorf("%q: host %q is neither an IP address nor a host name", s, host)
		}
	}
	return nil
}
