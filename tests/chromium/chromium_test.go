package chromium

import (
	"bytes"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve serves page at / on 127.0.0.1 and returns its URL.
func serve(t *testing.T, page string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// The DOM Chromium dumps is the rendered one (the script ran), and a
// screenshot has the asked size and is kept when the variable says so.
func TestIntegration_ChromiumDOMAndScreenshot(t *testing.T) {
	bin := Need(t)
	url := serve(t, `<!DOCTYPE html><html><body style="background:#cf222e"><p id="p">static</p>`+
		`<script>document.getElementById("p").textContent = "rendered by " + "script";</script></body></html>`)

	dom := string(Run(t, bin, url, "--dump-dom"))
	if !strings.Contains(dom, `<p id="p">rendered by script</p>`) {
		t.Errorf("dumped DOM does not show the script's change:\n%s", dom)
	}

	data, path := Screenshot(t, bin, url, 320, 200)
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != 320 || b.Dy() != 200 {
		t.Errorf("screenshot is %dx%d, want 320x200", b.Dx(), b.Dy())
	}
	if r, g, b, _ := img.At(160, 100).RGBA(); r>>8 < 0xc0 || g>>8 > 0x40 || b>>8 > 0x50 {
		t.Errorf("screenshot centre is #%02x%02x%02x, want the page's red #cf222e", r>>8, g>>8, b>>8)
	}

	dir := t.TempDir()
	t.Setenv(ScreenshotDirEnv, dir)
	if got := Keep(t, data, "chromium-test.png"); got != filepath.Join(dir, "chromium-test.png") {
		t.Errorf("Keep returned %q", got)
	}
	if kept, err := os.ReadFile(filepath.Join(dir, "chromium-test.png")); err != nil || !bytes.Equal(kept, data) {
		t.Errorf("kept screenshot: %v", err)
	}
	t.Setenv(ScreenshotDirEnv, "")
	if got := Keep(t, data, "x.png"); got != "" {
		t.Errorf("Keep without the variable returned %q", got)
	}
}
