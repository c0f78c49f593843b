package coordinator

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// rootPath is the znode under which every cluster lives.
const rootPath = "/snowflaked"

// seqDigits is how many digits ZooKeeper appends to a sequential znode name.
const seqDigits = 10

// maxNodeKeyLen bounds a node key in bytes (escaped, a name stays far below
// ZooKeeper's limits).
const maxNodeKeyLen = 255

// paths are the znodes of one cluster.
type paths struct {
	cluster, forever, leases, alive string
}

func newPaths(cluster string) paths {
	c := rootPath + "/" + cluster
	return paths{cluster: c, forever: c + "/forever", leases: c + "/leases", alive: c + "/alive"}
}

func (p paths) lease(id int64) string     { return p.leases + "/" + strconv.FormatInt(id, 10) }
func (p paths) aliveNode(id int64) string { return p.alive + "/" + strconv.FormatInt(id, 10) }

// foreverPrefix is the path handed to a sequential create for a node key:
// ZooKeeper appends the 10-digit sequence.
func (p paths) foreverPrefix(nodeKey string) string {
	return p.forever + "/" + escapeNodeKey(nodeKey) + "-"
}

// validateCluster checks a cluster name: it becomes one znode name as is.
func validateCluster(s string) error {
	if s == "" {
		return fmt.Errorf("cluster name is empty")
	}
	if len(s) > 100 {
		return fmt.Errorf("cluster name %q is longer than 100 bytes", s)
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		ok := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.'
		if !ok {
			return fmt.Errorf("cluster name %q: character %q not allowed (use letters, digits, '-', '_', '.')", s, b)
		}
	}
	if s[0] == '.' {
		return fmt.Errorf("cluster name %q must not start with '.'", s)
	}
	return nil
}

// validateNodeKey checks a node key: any printable UTF-8 text up to 255 bytes.
func validateNodeKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("node key is empty")
	case len(k) > maxNodeKeyLen:
		return fmt.Errorf("node key %.40q… is %d bytes, at most %d", k, len(k), maxNodeKeyLen)
	case !utf8.ValidString(k):
		return fmt.Errorf("node key %q is not valid UTF-8", k)
	}
	for _, r := range k {
		if unicode.IsControl(r) {
			return fmt.Errorf("node key %q contains control character %U", k, r)
		}
	}
	return nil
}

// keySafe reports whether byte b stands for itself in an escaped node key.
func keySafe(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
		strings.IndexByte("-_.:@+=,~", b) >= 0
}

// escapeNodeKey turns a node key into a znode-name-safe string, reversibly:
// bytes outside [A-Za-z0-9-_.:@+=,~] (and a leading '.') become %XX with
// upper-case hex. Every key has exactly one escaped form.
func escapeNodeKey(k string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(k))
	for i := 0; i < len(k); i++ {
		c := k[i]
		if keySafe(c) && !(i == 0 && c == '.') {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
	return b.String()
}

// unescapeNodeKey reverses escapeNodeKey. It accepts only the canonical
// escaped form of a valid node key, so two names never map to one key.
func unescapeNodeKey(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("escaped node key %q: truncated %%-escape at byte %d", s, i)
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("escaped node key %q: bad %%-escape %q at byte %d", s, s[i:i+3], i)
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	k := b.String()
	if err := validateNodeKey(k); err != nil {
		return "", fmt.Errorf("escaped node key %q: %w", s, err)
	}
	if escapeNodeKey(k) != s {
		return "", fmt.Errorf("escaped node key %q is not in canonical form (want %q)", s, escapeNodeKey(k))
	}
	return k, nil
}

// unhex decodes an upper-case hex digit, or returns -1.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// parseForeverName splits a forever child name "<escaped-key>-<10 digits>"
// into the node key and the sequence number.
func parseForeverName(name string) (key string, seq int64, err error) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, fmt.Errorf("forever znode name %q: want <escaped-node-key>-<%d-digit sequence>", name, seqDigits)
	}
	digits := name[i+1:]
	if len(digits) != seqDigits {
		return "", 0, fmt.Errorf("forever znode name %q: sequence %q is not %d digits", name, digits, seqDigits)
	}
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return "", 0, fmt.Errorf("forever znode name %q: sequence %q is not %d digits", name, digits, seqDigits)
		}
	}
	seq, err = strconv.ParseInt(digits, 10, 64)
	if err != nil || seq > 1<<31-1 {
		return "", 0, fmt.Errorf("forever znode name %q: sequence %q out of range", name, digits)
	}
	key, err = unescapeNodeKey(name[:i])
	if err != nil {
		return "", 0, fmt.Errorf("forever znode name %q: %w", name, err)
	}
	return key, seq, nil
}

// parseWorkerName parses a leases/ or alive/ child name: a worker ID in
// canonical decimal form within 0..maxID.
func parseWorkerName(name string, maxID int64) (int64, error) {
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil || strconv.FormatInt(id, 10) != name {
		return 0, fmt.Errorf("znode name %q is not a worker ID in decimal", name)
	}
	if id < 0 || id > maxID {
		return 0, fmt.Errorf("znode name %q: worker ID %d is outside 0..%d", name, id, maxID)
	}
	return id, nil
}
