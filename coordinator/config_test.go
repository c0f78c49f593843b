package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func validConfig() Config {
	return Config{
		Servers: []string{"127.0.0.1:2181"}, Cluster: "c", NodeKey: "n1", Advertise: "127.0.0.1:8080",
		Layout: snowflake.DefaultLayout(),
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mod     func(*Config)
		wantErr string
	}{
		{"valid", func(*Config) {}, ""},
		{"host without port", func(c *Config) { c.Servers = []string{"zk1", " zk2:2181 "} }, ""},
		{"no servers", func(c *Config) { c.Servers = nil }, "no ZooKeeper servers"},
		{"comma list", func(c *Config) { c.Servers = []string{"a:1,b:2"} }, "comma"},
		{"empty server", func(c *Config) { c.Servers = []string{"a:1", " "} }, "empty ZooKeeper server"},
		{"bad port", func(c *Config) { c.Servers = []string{"a:x"} }, "port"},
		{"bad cluster", func(c *Config) { c.Cluster = "a/b" }, "cluster name"},
		{"empty key", func(c *Config) { c.NodeKey = "" }, "node key is empty"},
		{"bad advertise", func(c *Config) { c.Advertise = "nope" }, "advertise"},
		{"auth without colon", func(c *Config) { c.Auth = "user" }, "user:password"},
		{"auth empty password", func(c *Config) { c.Auth = "user:" }, "user:password"},
		{"negative duration", func(c *Config) { c.ReportInterval = -time.Second }, "negative"},
		{"report interval above G/6", func(c *Config) { c.ZKFenceAhead = 12 * time.Second; c.ReportInterval = 2100 * time.Millisecond }, "a sixth of zk-fence-ahead"},
		{"report interval at G/6", func(c *Config) { c.ZKFenceAhead = 12 * time.Second; c.ReportInterval = 2 * time.Second }, ""},
		{"G below its minimum", func(c *Config) { c.ZKFenceAhead = 50 * time.Millisecond }, "zk-fence-ahead 50ms is below"},
		{"bad layout", func(c *Config) { c.Layout.TimeBits = 50 }, "invalid layout"},
		{"no layout", func(c *Config) { c.Layout = snowflake.Layout{} }, "invalid layout"},
		{"negative recycle-after", func(c *Config) { c.RecycleAfter = -time.Second }, "recycle-after -1s is negative"},
		{"recycle-after below 1ms", func(c *Config) { c.RecycleAfter = time.Microsecond }, "recycle-after 1µs is below 1ms"},
		{"recycle-after set", func(c *Config) { c.RecycleAfter = time.Millisecond }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			tc.mod(&cfg)
			c, err := New(cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if c.cfg.SessionTimeout != DefaultSessionTimeout || c.cfg.RecycleAfter != cfg.RecycleAfter || c.cfg.Clock == nil ||
					(cfg.ZKFenceAhead == 0 && c.cfg.ZKFenceAhead != DefaultZKFenceAhead) {
					t.Fatalf("defaults not applied (recycle-after zero stays zero: the cluster's): %+v", c.cfg)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New err = %v, want ErrInvalidConfig containing %q", err, tc.wantErr)
			}
		})
	}
}
