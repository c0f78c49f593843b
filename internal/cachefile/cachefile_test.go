package cachefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "cache.json") // directories are created
	want := Entry{Cluster: "c1", NodeKey: "pod-0", WorkerID: 7, Layout: snowflake.JS53Layout(), Fence: 1_700_000_000_123, Updated: 1_700_000_000_000, ZKReported: 1_699_999_999_000,
		Incarnation: "3f2a", Token: "9c1d", ZKFence: 1_700_000_030_000, ZKSession: "0x1a2b"}
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Layout.Equal(want.Layout) {
		t.Fatalf("layout %s, want %s", got.Layout.Describe(), want.Layout.Describe())
	}
	got.Layout, want.Layout = snowflake.Layout{}, snowflake.Layout{}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
}

func TestSaveLeavesNoTempFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cache.json")
	for i := int64(1); i <= 20; i++ {
		if err := Save(path, Entry{WorkerID: 1, Layout: snowflake.DefaultLayout(), Fence: snowflake.UnixMilli(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "cache.json" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only cache.json", names)
	}
	e, err := Load(path)
	if err != nil || e.Fence != 20 {
		t.Fatalf("last save lost: %+v, %v", e, err)
	}
}

func TestSaveFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cache.json")
	if err := Save(path, Entry{WorkerID: 1, Layout: snowflake.DefaultLayout(), Fence: 5}); err != nil {
		t.Fatal(err)
	}
	// A directory in the way of the temp file's rename makes the write fail.
	bad := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(bad, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Save(bad, Entry{WorkerID: 1, Layout: snowflake.DefaultLayout(), Fence: 6}); err == nil {
		t.Fatal("Save over a non-empty directory succeeded")
	}
	if e, err := Load(path); err != nil || e.Fence != 5 {
		t.Fatalf("old file damaged: %+v, %v", e, err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
		notFound         bool
	}{
		{"missing", filepath.Join(dir, "none.json"), "no cache file", true},
		{"not json", write("junk.json", "{fence: 1"), "damaged", false},
		{"empty", write("empty.json", ""), "damaged", false},
		{"bad layout", write("layout.json", `{"worker_id":1,"fence":1,"layout":{"layout":"70/0/0","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), "damaged", false},
		{"negative worker", write("neg.json", `{"worker_id":-1,"fence":1,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), "damaged", false},
		{"negative fence", write("negf.json", `{"worker_id":1,"fence":-5,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), "damaged", false},
		{"negative zk fence", write("negzf.json", `{"worker_id":1,"fence":5,"token":"ab","zk_fence":-5,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), "zk_fence -5", false},
		{"null", write("null.json", "null"), "holds null", false},
		{"empty object", write("obj.json", "{}"), `field "worker_id" is missing`, false},
		{"no fence", write("nofence.json", `{"worker_id":1,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), `field "fence" is missing`, false},
		{"null fence", write("nullfence.json", `{"worker_id":1,"fence":null,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), `field "fence" is null`, false},
		{"null layout", write("nulllayout.json", `{"worker_id":1,"fence":3,"layout":null}`), `field "layout" is null`, false},
		{"fence twice", write("twice.json", `{"worker_id":1,"fence":5,"fence":7,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), `field "fence" appears twice`, false},
		{"fence in another case", write("case.json", `{"worker_id":1,"fence":1700000000000,"Fence":0,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), `field "fence" appears twice`, false},
		{"only a capitalised fence", write("cap.json", `{"worker_id":1,"FENCE":5,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), `field "fence" is spelled "FENCE"`, false},
		{"zk fence without token", write("notoken.json", `{"worker_id":1,"fence":5,"zk_fence":9,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), "without the instance token", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.path)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrNotFound) != tc.notFound {
				t.Fatalf("errors.Is(ErrNotFound) = %v, want %v (%v)", !tc.notFound, tc.notFound, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("error %q should name %q and the path", err, tc.want)
			}
			if !tc.notFound && (strings.Contains(err.Error(), "start afresh") || !strings.Contains(err.Error(), "fence")) {
				t.Fatalf("error %q: the advice must say what removing the file costs, never just to start afresh", err)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	e := Entry{Cluster: "c", NodeKey: "k", WorkerID: 3}
	tests := []struct {
		cluster, key string
		worker       int64
		want         bool
	}{
		{"c", "k", 3, true},
		{"other", "k", 3, false},
		{"c", "other", 3, false},
		{"c", "k", 4, false},
	}
	for _, tc := range tests {
		if got := e.Matches(tc.cluster, tc.key, tc.worker); got != tc.want {
			t.Errorf("Matches(%q,%q,%d) = %v, want %v", tc.cluster, tc.key, tc.worker, got, tc.want)
		}
	}
}

// TestFileBytes: a cache file loads and saves back byte for byte, its times
// as plain integers (milliseconds since the Unix epoch).
func TestFileBytes(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	e := Entry{Cluster: "c1", NodeKey: "pod-0", WorkerID: 7, Layout: snowflake.DefaultLayout(), Fence: 1_700_000_000_123, Updated: 1_700_000_000_000,
		ZKReported: 1_699_999_999_000, Incarnation: "3f2a", Token: "9c1d", ZKFence: 1_700_000_030_000, ZKSession: "0x1a2b"}
	if err := Save(first, e); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"fence": 1700000000123,`, `"updated": 1700000000000,`, `"zk_reported": 1699999999000,`, `"zk_fence": 1700000030000,`} {
		if !strings.Contains(string(body), field) {
			t.Errorf("file lacks %s:\n%s", field, body)
		}
	}
	loaded, err := Load(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := Save(second, loaded); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(body) {
		t.Fatalf("saved again, the file differs:\n got %s\nwant %s", again, body)
	}
}
