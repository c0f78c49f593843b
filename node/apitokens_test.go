package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/segment"
)

// --api-tokens-file takes tokens and sha256: hashes, skips blanks and
// comments, and refuses what cannot be a token (naming the line), an empty
// file and a missing one, as invalid configuration.
func TestLoadAPITokens(t *testing.T) {
	tok, hashed := segment.NewToken(), segment.NewToken()
	for _, tc := range []struct {
		name    string
		content string // "-": no file
		accept  []string
		refuse  []string
		err     string
	}{
		{"tokens and hashes", "# ops\n" + tok + "\n\n  sha256:" + strings.ToUpper(segment.HashToken([]byte(hashed))) + "  \n", []string{tok, hashed}, []string{"sha256:" + segment.HashToken([]byte(hashed)), "x"}, ""},
		{"a short token", "short\n", nil, nil, "line 1: a token needs at least 16"},
		{"a bad hash", tok + "\nsha256:abc\n", nil, nil, "line 2: want sha256: and 64 hex digits"},
		{"a token with a space", "aaaaaaaa bbbbbbbbbbb\n", nil, nil, "line 1"},
		{"no token", "# none yet\n\n", nil, nil, "holds no token"},
		{"no file", "-", nil, nil, "--api-tokens-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			if tc.content != "-" {
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			set, err := loadAPITokens(path)
			if tc.err != "" {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("loadAPITokens: %v, want ErrInvalidConfig with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.accept {
				if !set.Match([]byte(a), time.Now()) {
					t.Errorf("%q refused", a)
				}
			}
			for _, r := range tc.refuse {
				if set.Match([]byte(r), time.Now()) {
					t.Errorf("%q accepted", r)
				}
			}
			for _, h := range set.Hashes {
				if strings.Contains(h.SHA256, tok) {
					t.Error("a token kept as is")
				}
			}
		})
	}
}
