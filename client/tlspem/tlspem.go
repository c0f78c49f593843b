// Package tlspem reads the PEM files of a TLS configuration: a bundle of CA
// certificates into a pool (CA), a certificate with its private key into a
// tls.Certificate (Pair). Its errors are *FileError: they name the file at
// fault and say which of the files it is, so that a caller can name its own
// flag or field. It needs the standard library only; snowflaked's API and
// ZooKeeper TLS and the client's read their files through it.
package tlspem

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
)

// Role says which file of a TLS configuration a FileError is about.
type Role string

// The files of a TLS configuration.
const (
	RoleCA   Role = "CA"          // certificates a peer's must chain to
	RoleCert Role = "certificate" // our certificate (chain)
	RoleKey  Role = "key"         // our certificate's private key
)

// FileError is a PEM file that cannot be used: unreadable, holding no PEM
// block of the right kind, or a key that does not go with its certificate.
type FileError struct {
	Role Role   // which file
	File string // its path
	Err  error  // why
}

// Error says which file, its path and why, e.g. "key /etc/k.pem: does not
// go with certificate /etc/c.pem: tls: private key does not match public
// key".
func (e *FileError) Error() string { return fmt.Sprintf("%s %s: %v", e.Role, e.File, e.Err) }

// Unwrap returns the cause (an *fs.PathError for a file that cannot be
// read).
func (e *FileError) Unwrap() error { return e.Err }

// CA reads a bundle of PEM CA certificates into a pool. A file without a
// PEM certificate is an error.
func CA(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, &FileError{RoleCA, file, err}
	}
	pool := x509.NewCertPool()
	if !bytes.Contains(b, []byte("-----BEGIN CERTIFICATE-----")) || !pool.AppendCertsFromPEM(b) {
		return nil, &FileError{RoleCA, file, fmt.Errorf("no PEM certificate in it")}
	}
	return pool, nil
}

// Pair reads a PEM certificate (chain) and its PEM private key. The error
// is about the certificate when that cannot be read or parsed, and about
// the key when the key cannot be read or parsed or does not go with the
// certificate.
func Pair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, &FileError{RoleCert, certFile, err}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, &FileError{RoleKey, keyFile, err}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "certificate input"):
			return tls.Certificate{}, &FileError{RoleCert, certFile, err}
		case strings.Contains(msg, "does not match"):
			return tls.Certificate{}, &FileError{RoleKey, keyFile, fmt.Errorf("does not go with certificate %s: %w", certFile, err)}
		case strings.Contains(msg, "key input"), strings.Contains(msg, "private key"):
			return tls.Certificate{}, &FileError{RoleKey, keyFile, err}
		}
		return tls.Certificate{}, &FileError{RoleCert, certFile, fmt.Errorf("with key %s: %w", keyFile, err)}
	}
	return pair, nil
}
