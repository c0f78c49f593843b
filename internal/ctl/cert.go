package ctl

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/certgen"
)

// certUsage is the usage line of "snowflakectl cert".
const certUsage = "cert create-ca --dir D | create-node --dir D --hosts H,… [--name node] | create-client --dir D NAME | create-zk --dir D --hosts H,… [--secure-port 2281]  ([--overwrite] [--lifetime …])"

// certUsages are the usage lines of cert's subcommands.
var certUsages = map[string]string{
	"create-ca":     "cert create-ca --dir D [--name snowflaked-ca] [--lifetime 87600h] [--overwrite]",
	"create-node":   "cert create-node --dir D --hosts 127.0.0.1,node-1,… [--name node] [--ca-cert D/ca.crt --ca-key D/ca.key] [--lifetime 17520h] [--overwrite]",
	"create-client": "cert create-client --dir D NAME [--ca-cert D/ca.crt --ca-key D/ca.key] [--lifetime 17520h] [--overwrite]",
	"create-zk":     "cert create-zk --dir D --hosts 127.0.0.1,zk-1,… [--name zookeeper] [--secure-port 2281] [--ca-cert D/ca.crt --ca-key D/ca.key] [--lifetime 17520h] [--overwrite]",
}

// certFlags are the flags of the cert subcommands.
type certFlags struct {
	dir, name, hosts, caCert, caKey string
	lifetime                        time.Duration
	overwrite                       bool
	securePort                      int
}

// cert makes certificates: a CA, node, client and ZooKeeper certificates
// signed by it (internal/certgen), written to --dir.
func cert(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "snowflakectl cert: want a subcommand:", certUsage)
		return exitUsage
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(stdout, "Usage: snowflakectl %s\n\nRun 'snowflakectl cert <create-ca|create-node|create-client|create-zk> --help' for a subcommand's flags.\n", certUsage)
		return exitOK
	}
	usageLine, ok := certUsages[sub]
	if !ok {
		fmt.Fprintf(stderr, "snowflakectl cert: unknown subcommand %q: %s\n", sub, certUsage)
		return exitUsage
	}
	cmd := "snowflakectl cert " + sub
	fs := newFlagSet("cert "+sub, usageLine, stderr)
	var f certFlags
	f.register(fs, sub)
	pos, code, ok := parse(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	want := 0
	if sub == "create-client" {
		want = 1
	}
	if len(pos) != want {
		if want == 1 {
			fmt.Fprintf(stderr, "%s: want one client NAME (what --tls-client-allow lists), got %d arguments\nUsage: snowflakectl %s\n", cmd, len(pos), usageLine)
		} else {
			fmt.Fprintf(stderr, "%s: unexpected arguments %q\nUsage: snowflakectl %s\n", cmd, pos, usageLine)
		}
		return exitUsage
	}
	if f.dir == "" {
		fmt.Fprintf(stderr, "%s: --dir is required (where the files go)\n", cmd)
		return exitUsage
	}
	if f.lifetime <= 0 {
		fmt.Fprintf(stderr, "%s: --lifetime %s: must be positive\n", cmd, f.lifetime)
		return exitUsage
	}
	var files []certgen.File
	var err error
	switch sub {
	case "create-ca":
		files, err = f.createCA()
	case "create-node":
		files, err = f.createNode()
	case "create-client":
		files, err = f.createClient(pos[0])
	case "create-zk":
		files, err = f.createZK()
	}
	var usageErr usageError
	switch {
	case errors.As(err, &usageErr):
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitFailure
	}
	if err := certgen.WriteFiles(files, f.overwrite); err != nil {
		if errors.Is(err, certgen.ErrExists) {
			fmt.Fprintf(stderr, "%s: %v: nothing was written (--overwrite replaces the files)\n", cmd, err)
			return exitFailure
		}
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitFailure
	}
	for _, file := range files {
		what := "certificate"
		switch {
		case strings.HasSuffix(file.Path, ".cfg"):
			what = "zoo.cfg lines"
		case strings.HasSuffix(file.Path, "-keystore.pem"):
			what = "ZooKeeper key store (PKCS #8 key, then certificate), 0600"
		case file.Secret:
			what = "private key, 0600"
		}
		fmt.Fprintf(stdout, "wrote %s  (%s)\n", file.Path, what)
	}
	if sub == "create-zk" {
		fmt.Fprintf(stdout, "\nAdd to zoo.cfg (Netty must be on ZooKeeper's classpath; docs/security.md):\n%s", files[len(files)-1].Data)
	}
	return exitOK
}

// usageError is a problem with the command line (exit 2).
type usageError struct{ error }

func (f *certFlags) register(fs *flag.FlagSet, sub string) {
	fs.StringVar(&f.dir, "dir", "", "directory of the files (created 0700 when missing); the CA is read from it")
	fs.BoolVar(&f.overwrite, "overwrite", false, "replace files that exist (default: refuse, writing nothing)")
	lifetime, name := 2*365*24*time.Hour, ""
	switch sub {
	case "create-ca":
		lifetime, name = 10*365*24*time.Hour, "snowflaked-ca"
	case "create-node":
		name = "node"
	case "create-zk":
		name = "zookeeper"
	}
	fs.DurationVar(&f.lifetime, "lifetime", lifetime, "how long the certificate is valid (a leaf never outlives its CA)")
	if sub != "create-client" {
		help := "common name, and the files' names (NAME.crt, NAME.key)"
		if sub == "create-ca" {
			help = "the CA's common name (files: ca.crt, ca.key)"
		}
		fs.StringVar(&f.name, "name", name, help)
	}
	if sub == "create-ca" {
		return
	}
	fs.StringVar(&f.caCert, "ca-cert", "", "the CA's certificate (default DIR/ca.crt)")
	fs.StringVar(&f.caKey, "ca-key", "", "the CA's private key (default DIR/ca.key)")
	switch sub {
	case "create-node":
		fs.StringVar(&f.hosts, "hosts", "", "host,…: every IP address and DNS name clients and peers reach the node by (its --advertise host), as IP and DNS SANs (required)")
	case "create-zk":
		fs.StringVar(&f.hosts, "hosts", "", "host,…: every IP address and DNS name in the nodes' --zk (required)")
		fs.IntVar(&f.securePort, "secure-port", 2281, "ZooKeeper's secureClientPort, for the zoo.cfg lines")
	}
}

func (f *certFlags) path(name string) string { return filepath.Join(f.dir, name) }

func (f *certFlags) createCA() ([]certgen.File, error) {
	if f.name == "" {
		return nil, usageError{errors.New("--name: empty")}
	}
	ca, err := certgen.NewCA(f.name, f.lifetime)
	if err != nil {
		return nil, err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	return []certgen.File{
		{Path: f.path("ca.crt"), Data: ca.CertPEM},
		{Path: f.path("ca.key"), Data: key, Secret: true},
	}, nil
}

// loadCA reads the CA of --ca-cert/--ca-key (default in --dir), saying how
// to make one when there is none.
func (f *certFlags) loadCA() (*certgen.Authority, error) {
	certFile, keyFile := f.caCert, f.caKey
	if certFile == "" {
		certFile = f.path("ca.crt")
	}
	if keyFile == "" {
		keyFile = f.path("ca.key")
	}
	ca, err := certgen.LoadCA(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("the CA (--ca-cert %s, --ca-key %s): %w (make one with: snowflakectl cert create-ca --dir %s)", certFile, keyFile, err, f.dir)
	}
	return ca, nil
}

// hostList is --hosts, checked: at least one, each an IP address or a DNS
// name, no port.
func (f *certFlags) hostList() ([]string, error) {
	if strings.TrimSpace(f.hosts) == "" {
		return nil, usageError{errors.New("--hosts is required: the IP addresses and DNS names the others reach it by, e.g. --hosts 127.0.0.1,node-1")}
	}
	var out []string
	for _, h := range strings.Split(f.hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, usageError{fmt.Errorf("--hosts %q: an empty entry", f.hosts)}
		}
		if _, _, err := net.SplitHostPort(h); err == nil {
			return nil, usageError{fmt.Errorf("--hosts: %q has a port: give the host alone", h)}
		}
		if net.ParseIP(h) == nil && !certgen.ValidDNSName(h) {
			return nil, usageError{fmt.Errorf("--hosts: %q is neither an IP address nor a DNS name", h)}
		}
		out = append(out, h)
	}
	return out, nil
}

// issue signs r with the CA and returns NAME.crt and NAME.key.
func (f *certFlags) issue(name string, r certgen.Request) (*certgen.Leaf, []certgen.File, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." || name == "ca" {
		return nil, nil, usageError{fmt.Errorf("name %q: want a plain name (it names the files NAME.crt and NAME.key; not \"ca\")", name)}
	}
	ca, err := f.loadCA()
	if err != nil {
		return nil, nil, err
	}
	r.Lifetime = f.lifetime
	leaf, err := ca.Issue(r)
	if err != nil {
		return nil, nil, err
	}
	return leaf, []certgen.File{
		{Path: f.path(name + ".crt"), Data: leaf.CertPEM},
		{Path: f.path(name + ".key"), Data: leaf.KeyPEM, Secret: true},
	}, nil
}

// createNode: serverAuth (it serves the API) and clientAuth (it presents
// the same certificate to its peers and to ZooKeeper).
func (f *certFlags) createNode() ([]certgen.File, error) {
	hosts, err := f.hostList()
	if err != nil {
		return nil, err
	}
	_, files, err := f.issue(f.name, certgen.Request{CommonName: f.name, Hosts: hosts, Server: true, Client: true})
	return files, err
}

// createClient: clientAuth only, named NAME (common name, and DNS SAN
// when NAME can be one) for --tls-client-allow and --tls-admin-allow.
func (f *certFlags) createClient(name string) ([]certgen.File, error) {
	var hosts []string
	if certgen.ValidDNSName(name) && net.ParseIP(name) == nil {
		hosts = []string{name}
	}
	_, files, err := f.issue(name, certgen.Request{CommonName: name, Hosts: hosts, Client: true})
	return files, err
}

// createZK: ZooKeeper's certificate (serverAuth for its client port;
// clientAuth too, for quorum TLS), its PEM key store and the zoo.cfg lines.
func (f *certFlags) createZK() ([]certgen.File, error) {
	hosts, err := f.hostList()
	if err != nil {
		return nil, err
	}
	if f.securePort < 1 || f.securePort > 65535 {
		return nil, usageError{fmt.Errorf("--secure-port %d: want 1 to 65535", f.securePort)}
	}
	leaf, files, err := f.issue(f.name, certgen.Request{CommonName: f.name, Hosts: hosts, Server: true, Client: true})
	if err != nil {
		return nil, err
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	store := f.path(f.name + "-keystore.pem")
	trust := f.caCert
	if trust == "" {
		trust = f.path("ca.crt")
	}
	cfg := certgen.ZooCfg(f.securePort, abs(store), abs(trust))
	return append(files,
		certgen.File{Path: store, Data: leaf.ZooKeeperKeyStore(), Secret: true},
		certgen.File{Path: f.path(f.name + "-tls.cfg"), Data: []byte(cfg)},
	), nil
}
