package coordinator

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// NewAdmin refuses bad servers, auth and timeouts as ErrInvalidConfig
// naming what is wrong, before any connection.
func TestNewAdminRefusesBadSettings(t *testing.T) {
	ok := []string{"127.0.0.1:2181"}
	for _, tc := range []struct {
		name    string
		servers []string
		auth    string
		timeout time.Duration
		want    string
	}{
		{"no servers", nil, "", time.Second, "no ZooKeeper servers"},
		{"an empty server", []string{"127.0.0.1:2181", " "}, "", time.Second, "empty ZooKeeper server address"},
		{"a bad port", []string{"zk:x"}, "", time.Second, `port "x" is not a number`},
		{"auth without a password", ok, "user", time.Second, "zk auth must be user:password"},
		{"auth without a user", ok, ":pw", time.Second, "zk auth must be user:password"},
		{"a zero timeout", ok, "", 0, "timeout 0s is not positive"},
		{"a negative timeout", ok, "", -time.Second, "timeout -1s is not positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAdmin(tc.servers, tc.auth, tc.timeout)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || a != nil {
				t.Fatalf("NewAdmin = %v, %v; want ErrInvalidConfig containing %q", a, err, tc.want)
			}
		})
	}
	if a, err := NewAdmin(ok, "user:pw", time.Second); err != nil || a == nil {
		t.Fatalf("NewAdmin with good settings: %v", err)
	}
}

// expiringConn is a connection whose State says expired once expired is
// set.
type expiringConn struct {
	zkconn.Conn
	expired *atomic.Bool
}

func (c expiringConn) State() zk.State {
	if c.expired.Load() {
		return zk.StateExpired
	}
	return c.Conn.State()
}

// One Admin holds one session for its commands: a create after a delete
// sees the delete (the tombstone it left), a list sees both; a bad
// cluster name is refused without a session; the session ZooKeeper
// expired is opened again; after Close commands fail and the session is
// gone.
func TestAdminHoldsOneSession(t *testing.T) {
	srv := zkmem.New()
	var last atomic.Pointer[atomic.Bool] // the expiry of the last session opened
	var dials atomic.Int32
	dial := func(servers []string, opt zkconn.Options) (zkconn.Conn, error) {
		dials.Add(1)
		c, err := srv.Dial(servers, opt)
		if err != nil {
			return nil, err
		}
		expired := new(atomic.Bool)
		last.Store(expired)
		return expiringConn{Conn: c, expired: expired}, nil
	}
	ctx := context.Background()
	a, err := NewAdmin([]string{"127.0.0.1:2181"}, "", 5*time.Second, WithAdminDial(dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if _, err := a.CreateCluster(ctx, "a/b", ClusterSpec{Layout: snowflake.DefaultLayout()}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `cluster name "a/b"`) {
		t.Fatalf("CreateCluster of a bad name: %v, want ErrInvalidConfig naming it", err)
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("%d sessions opened before a command could run, want none", n)
	}
	runCommandsInOneSession(t, a)
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d sessions opened for the commands, want 1", n)
	}
	last.Load().Store(true)
	if _, err := a.ListWorkers(ctx, "eu"); err != nil {
		t.Fatalf("ListWorkers after the session expired: %v", err)
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d sessions opened after one expired, want 2", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if srv.LiveSessions() != 0 {
		t.Fatalf("%d sessions live after Close, want none", srv.LiveSessions())
	}
	if _, err := a.ListTombstones(ctx); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("ListTombstones after Close: %v, want an error saying the handle is closed", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
}

// runCommandsInOneSession runs commands on a that each see what the one
// before did: create, delete, create over the tombstone (refused, then
// done), list, retire.
func runCommandsInOneSession(t *testing.T, a *Admin) {
	t.Helper()
	ctx := context.Background()
	spec := ClusterSpec{Layout: snowflake.DefaultLayout(), WorkerIDs: WorkerRange{Lo: 0, Hi: 7}}
	if res, err := a.CreateCluster(ctx, "eu", spec); err != nil || !res.Created {
		t.Fatalf("CreateCluster: %+v, %v", res, err)
	}
	if err := a.DeleteCluster(ctx, "eu"); err != nil {
		t.Fatalf("DeleteCluster: %v", err)
	}
	coarse := snowflake.DefaultLayout()
	coarse.Unit = 10 * time.Millisecond
	if _, err := a.CreateCluster(ctx, "eu", ClusterSpec{Layout: coarse}); !errors.Is(err, ErrTombstone) {
		t.Fatalf("CreateCluster over the tombstone with another time unit: %v, want ErrTombstone", err)
	}
	if res, err := a.CreateCluster(ctx, "eu", spec); err != nil || !res.Created {
		t.Fatalf("CreateCluster again over the tombstone: %+v, %v", res, err)
	}
	rows, err := a.ListClusters(ctx)
	if err != nil || len(rows) != 1 || rows[0].Name != "eu" || rows[0].Deleted || rows[0].Tombstone == nil {
		t.Fatalf("ListClusters = %+v, %v; want eu with its tombstone", rows, err)
	}
	if _, err := a.Retire(ctx, "eu", "gone"); !errors.Is(err, ErrUnknownNodeKey) {
		t.Fatalf("Retire: %v, want ErrUnknownNodeKey", err)
	}
}
