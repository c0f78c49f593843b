package wire

import (
	"strings"
	"testing"
)

func TestCheckHostPort(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" for accepted, else a word of the error
	}{
		{"127.0.0.1:8080", ""},
		{"[::1]:2181", ""},
		{"zk-1.example.internal:2181", ""},
		{"node_7:65535", ""},
		{"127.0.0.1", "not host:port"},
		{":8080", "no host"},
		{"127.0.0.1:0", "1..65535"},
		{"127.0.0.1:65536", "1..65535"},
		{"127.0.0.1:+80", "1..65535"},
		{"127.0.0.1:080", "1..65535"},
		{"127.0.0.1:http", "1..65535"},
		{"evil/path:80", "neither an IP address nor a host name"},
		{"a b:80", "neither an IP address nor a host name"},
		{"user@host:80", "neither an IP address nor a host name"},
		{"host?x=1:80", "neither an IP address nor a host name"},
		{"host#f:80", "neither an IP address nor a host name"},
		{"", "not host:port"},
	} {
		err := CheckHostPort(tc.in)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckHostPort(%q) = %v, want nil", tc.in, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckHostPort(%q) = %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
}
