package deploy_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/certgen"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// scrape-https.yml is scrape-static.yml over HTTPS with a client
// certificate: the same job, plus scheme: https and a tls_config naming a
// CA, a certificate and its key. promtool check config accepts it once
// those files exist (it reads them), written where the shipped file names
// them; `make run` with RUN_TLS=1 rewrites the paths the same way, and the
// walkthrough test of docs/security.md scrapes TLS nodes with it.
func TestScrapeConfigHTTPS(t *testing.T) {
	const shipped = "prometheus/scrape-https.yml"
	job := loadScrapeJob(t, shipped)
	if job["scheme"] != "https" {
		t.Errorf("%s: scheme %v, want https", shipped, job["scheme"])
	}
	tc, ok := job["tls_config"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no tls_config", shipped)
	}
	if got := slices.Sorted(maps.Keys(tc)); !slices.Equal(got, []string{"ca_file", "cert_file", "key_file"}) {
		t.Errorf("%s: tls_config has %v, want ca_file, cert_file, key_file", shipped, got)
	}
	// The rest is scrape-static.yml's job, so that the two stay in step.
	plain := loadScrapeJob(t, "prometheus/scrape-static.yml")
	delete(job, "scheme")
	delete(job, "tls_config")
	if !reflect.DeepEqual(job, plain) {
		t.Errorf("%s without scheme and tls_config differs from scrape-static.yml's job:\n%v\n%v", shipped, job, plain)
	}

	// The files it names, made by certgen as snowflakectl cert makes them.
	dir := t.TempDir()
	ca, err := certgen.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(certgen.Request{CommonName: "prometheus", Hosts: []string{"prometheus"}, Client: true, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(shipped)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca_file": ca.CertPEM, "cert_file": leaf.CertPEM, "key_file": leaf.KeyPEM}
	cfg := string(b)
	for k, data := range files {
		path := tc[k].(string)
		local := filepath.Join(dir, filepath.Base(path))
		if err := os.WriteFile(local, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg = strings.ReplaceAll(cfg, path, local)
	}
	rewritten := filepath.Join(dir, "scrape-https.yml")
	if err := os.WriteFile(rewritten, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool := testsupport.NeedTool(t, "prometheus", "promtool")
	out, err := exec.Command(promtool, "check", "config", rewritten).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool check config %s: %v\n%s", shipped, err, out)
	}
	// And a key that is not there fails the check: promtool did read them.
	if err := os.Remove(filepath.Join(dir, filepath.Base(tc["key_file"].(string)))); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", rewritten).CombinedOutput(); err == nil {
		t.Errorf("promtool check config passes without the key file:\n%s", out)
	}
}
