package tlspem

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/client/internal/pemtest"
)

// Every file that cannot be used gives a *FileError naming it and saying
// which file it is; a good CA and a good pair load.
func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	cert, key := pemtest.SelfSigned(t, dir, "a")
	_, otherKey := pemtest.SelfSigned(t, dir, "b")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a PEM file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name      string
		load      func() error
		role      Role
		file      string
		wantText  string
		notExists bool
	}{
		{"CA missing", func() error { _, err := CA(missing); return err }, RoleCA, missing, "no such file", true},
		{"CA not PEM", func() error { _, err := CA(garbage); return err }, RoleCA, garbage, "no PEM certificate", false},
		{"CA is a key", func() error { _, err := CA(key); return err }, RoleCA, key, "no PEM certificate", false},
		{"certificate missing", func() error { _, err := Pair(missing, key); return err }, RoleCert, missing, "no such file", true},
		{"key missing", func() error { _, err := Pair(cert, missing); return err }, RoleKey, missing, "no such file", true},
		{"certificate not PEM", func() error { _, err := Pair(garbage, key); return err }, RoleCert, garbage, "certificate input", false},
		{"key not PEM", func() error { _, err := Pair(cert, garbage); return err }, RoleKey, garbage, "key input", false},
		{"a certificate given as the key", func() error { _, err := Pair(cert, cert); return err }, RoleKey, cert, "key", false},
		{"key of another certificate", func() error { _, err := Pair(cert, otherKey); return err }, RoleKey, otherKey, "does not go with certificate " + cert, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.load()
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("%v: want a *FileError", err)
			}
			if fe.Role != tc.role || fe.File != tc.file {
				t.Errorf("%v: role %q file %q, want %q %q", err, fe.Role, fe.File, tc.role, tc.file)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, string(tc.role)+" "+tc.file+": ") || !strings.Contains(msg, tc.wantText) {
				t.Errorf("%q: want %q, the path, and %q", msg, tc.role, tc.wantText)
			}
			if errors.Is(err, fs.ErrNotExist) != tc.notExists {
				t.Errorf("%v: errors.Is(fs.ErrNotExist) = %v, want %v", err, !tc.notExists, tc.notExists)
			}
		})
	}
	if _, err := CA(cert); err != nil {
		t.Errorf("CA of a certificate: %v", err)
	}
	pair, err := Pair(cert, key)
	if err != nil || len(pair.Certificate) != 1 {
		t.Errorf("Pair: %d certificates, %v; want the pair", len(pair.Certificate), err)
	}
}
