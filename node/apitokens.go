package node

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"codeberg.org/snowflaked/snowflaked/segment"
)

// apiTokenHashPrefix marks a line of --api-tokens-file that is a token's
// SHA-256 (hex) rather than the token itself.
const apiTokenHashPrefix = "sha256:"

// minAPITokenLen is the shortest token --api-tokens-file takes as is.
const minAPITokenLen = 16

// loadAPITokens reads --api-tokens-file: one token a line, or
// "sha256:<64 hex digits>" for a token's hash (segment.HashToken); blank
// lines and lines starting with # are skipped. The tokens themselves are
// hashed at once and kept only as hashes. An error names the file and the
// line, and wraps ErrInvalidConfig.
func loadAPITokens(path string) (*segment.TokenSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --api-tokens-file: %w", ErrInvalidConfig, err)
	}
	set := &segment.TokenSet{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		bad := func(why string) error {
			return fmt.Errorf("%w: --api-tokens-file %s, line %d: %s", ErrInvalidConfig, path, i+1, why)
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, apiTokenHashPrefix):
			h := strings.ToLower(strings.TrimPrefix(line, apiTokenHashPrefix))
			if d, err := hex.DecodeString(h); err != nil || len(d) != 32 {
				return nil, bad("want sha256: and 64 hex digits")
			}
			set.Hashes = append(set.Hashes, segment.TokenHash{SHA256: h})
		case len(line) < minAPITokenLen || strings.ContainsAny(line, " \t"):
			return nil, bad(fmt.Sprintf("a token needs at least %d characters and no spaces (snowflakectl prints 43)", minAPITokenLen))
		default:
			set.Hashes = append(set.Hashes, segment.TokenHash{SHA256: segment.HashToken([]byte(line))})
		}
	}
	if len(set.Hashes) == 0 {
		return nil, fmt.Errorf("%w: --api-tokens-file %s holds no token", ErrInvalidConfig, path)
	}
	return set, nil
}
