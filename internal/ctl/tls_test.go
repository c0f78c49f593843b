package ctl

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles/tlstest"
)

// probe speaks HTTPS with --tls-ca, --tls-cert and --tls-key, or the same
// from SNOWFLAKED_TLS_CA, _CERT and _KEY, to a server that requires a
// client certificate; bad TLS flags exit 2 naming the flag or the file.
func TestProbeTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	server, app := ca.Issue(t, "server"), ca.Issue(t, "app")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"state":"in_service"}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{server.TLS(t)}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url := srv.URL + "/readyz" // https://127.0.0.1:port
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		code    int
		wantErr string
	}{
		{"flags", nil, []string{"--tls-ca", ca.File, "--tls-cert", app.CertFile, "--tls-key", app.KeyFile}, 0, ""},
		{"environment", map[string]string{"SNOWFLAKED_TLS_CA": ca.File, "SNOWFLAKED_TLS_CERT": app.CertFile, "SNOWFLAKED_TLS_KEY": app.KeyFile}, nil, 0, ""},
		{"no client certificate", nil, []string{"--tls-ca", ca.File}, 1, "certificate required"},
		{"the system's roots", nil, nil, 1, "certificate"},
		{"cert without key", nil, []string{"--tls-ca", ca.File, "--tls-cert", app.CertFile}, 2, "--tls-cert and --tls-key go together"},
		{"CA file missing", nil, []string{"--tls-ca", ca.File + ".missing"}, 2, "--tls-ca: bad TLS file: CA " + ca.File + ".missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"SNOWFLAKED_TLS_CA", "SNOWFLAKED_TLS_CERT", "SNOWFLAKED_TLS_KEY"} {
				t.Setenv(k, tc.env[k])
			}
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"probe", url}, tc.args...), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.wantErr)
			}
			if code == 0 && !strings.Contains(stdout.String(), "in_service") {
				t.Errorf("stdout %q", stdout.String())
			}
		})
	}
}
