// Package cachefile keeps a node's identity and time fence on local disk, so
// it can restart safely even while ZooKeeper is down. Every write is atomic:
// temp file, fsync, rename, fsync of the directory.
package cachefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"

	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// ErrNotFound means there is no cache file yet.
var ErrNotFound = errors.New("no cache file")

// Entry is the content of the cache file.
type Entry struct {
	Cluster  string           `json:"cluster"`  // cluster name; "" in standalone mode
	NodeKey  string           `json:"node_key"` // node key; "" in standalone mode
	WorkerID int64            `json:"worker_id"`
	Layout   snowflake.Layout `json:"layout"`
	// Fence: no ID was issued with a timestamp beyond it.
	Fence snowflake.UnixMilli `json:"fence"`
	// Updated is when the entry was written (by the wall clock).
	Updated snowflake.UnixMilli `json:"updated"`
	// ZKReported is when the last report reached ZooKeeper (0 if unknown
	// or standalone). A node starting with ZooKeeper down passes it
	// to coordinator.ResumeFromCache, for its status.
	ZKReported snowflake.UnixMilli `json:"zk_reported,omitempty"`

	// ZooKeeper mode only (all empty in standalone mode and in files written
	// before the fencing token existed).

	// Incarnation is the random ID of the cluster znode this entry belongs
	// to: a ZooKeeper rebuilt from scratch has another one.
	Incarnation string `json:"incarnation,omitempty"`
	// Token is the instance token this process wrote into its forever znode
	// when it claimed the worker ID (its fencing token's identity).
	Token string `json:"token,omitempty"`
	// ZKFence is the fence ZooKeeper acknowledged for Token: the holder of
	// Token may issue up to it, nobody else below it.
	ZKFence snowflake.UnixMilli `json:"zk_fence,omitempty"`
	// ZKSession is the ZooKeeper session (hex, "0x…") that held the lease:
	// a restart on this disk may delete a lease of that session at once.
	ZKSession string `json:"zk_session,omitempty"`
}

// Matches reports whether the entry belongs to this cluster, node key and
// worker ID, so its fence bounds what this node issued before.
func (e Entry) Matches(cluster, nodeKey string, workerID int64) bool {
	return e.Cluster == cluster && e.NodeKey == nodeKey && e.WorkerID == workerID
}

// Load reads the cache file at path. A missing file gives ErrNotFound; a
// damaged one a descriptive error (never a silent default).
func Load(path string) (Entry, error) { return LoadFrom(disk.OS{}, path) }

// LoadFrom is Load from disk d.
func LoadFrom(d disk.Disk, path string) (Entry, error) {
	b, err := d.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, fmt.Errorf("load cache %s: %w", path, ErrNotFound)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("load cache %s: %w", path, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Entry{}, damaged(path, err.Error())
	}
	if raw == nil {
		return Entry{}, damaged(path, "it holds null, not a cache entry")
	}
	if err := checkKeys(b); err != nil {
		return Entry{}, damaged(path, err.Error())
	}
	for _, f := range requiredFields {
		switch v, ok := raw[f]; {
		case !ok:
			return Entry{}, damaged(path, fmt.Sprintf("field %q is missing", f))
		case string(v) == "null":
			return Entry{}, damaged(path, fmt.Sprintf("field %q is null", f))
		}
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, damaged(path, err.Error())
	}
	if e.WorkerID < 0 || e.Fence < 0 || e.ZKReported < 0 || e.ZKFence < 0 {
		return Entry{}, damaged(path, fmt.Sprintf("worker ID %d, fence %d, zk_reported %d, zk_fence %d", e.WorkerID, e.Fence, e.ZKReported, e.ZKFence))
	}
	if e.ZKFence > 0 && e.Token == "" {
		return Entry{}, damaged(path, fmt.Sprintf("a ZooKeeper fence %d without the instance token it was granted to", e.ZKFence))
	}
	return e, nil
}

// requiredFields are in every cache file snowflaked writes: a file without
// one of them is damaged, never read as a zero (a missing fence read as 0
// would let a restart issue again what its predecessor issued).
var requiredFields = []string{"worker_id", "layout", "fence"}

// checkKeys refuses a top-level key given twice, or in another case than
// the field's (Go's decoder matches keys case-insensitively and keeps the
// last: "fence" then "Fence" would be read as the second).
func checkKeys(b []byte) error {
	known := map[string]bool{}
	t := reflect.TypeOf(Entry{})
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" {
			known[strings.ToLower(name)] = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // '{', checked by the caller
		return err
	}
	seen := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		lower := strings.ToLower(key)
		if prev, dup := seen[lower]; dup {
			return fmt.Errorf("field %q appears twice (as %q and %q)", lower, prev, key)
		}
		seen[lower] = key
		if known[lower] && key != lower {
			return fmt.Errorf("field %q is spelled %q", lower, key)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// damaged is the error for a damaged cache file: what is wrong, and what to
// do without throwing the fence away unawares.
func damaged(path, why string) error {
	return fmt.Errorf("load cache %s: damaged: %s. Fix the field or restore the file from a backup. "+
		"Removing it throws its fence away: in standalone mode the node may then issue again IDs it issued before "+
		"(ZooKeeper mode still starts after the ZooKeeper fence); if you must, write \"fence\" yourself as a Unix-ms "+
		"time after the last ID this node issued (the file's modification time plus --fence-ahead is one)", path, why)
}

// Save writes e to path atomically and durably: a crash leaves either the
// old file or the new one, never a mix.
func Save(path string, e Entry) error { return SaveTo(disk.OS{}, path, e) }

// SaveTo is Save on disk d.
func SaveTo(d disk.Disk, path string, e Entry) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("save cache: %w", err)
	}
	return d.WriteFileAtomic(path, append(b, '\n'), 0o600)
}

// WriteFileAtomic writes data to path through a temp file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return disk.WriteFileAtomic(path, data, perm)
}
