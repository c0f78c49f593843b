package client

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

// NextSegment sends Config.Tokens' token of a tag as Authorization:
// Bearer, and no token for the other tags; a node's 401/403 is
// ErrRejected with its code. A token that cannot go in a header is an
// invalid config.
func TestNextSegmentSendsTheTagsToken(t *testing.T) {
	const good = "tok_3xAmpl3-_"
	f := startFake(t, 1, func(w http.ResponseWriter, r *http.Request, _ int) bool {
		switch got := r.Header.Get("Authorization"); {
		case r.URL.Path != "/segment/secret":
			if got != "" {
				writeBody(w, 400, `{"error":{"code":"invalid_parameter","message":"a token sent for another tag"}}`)
				return true
			}
			return false
		case got == "":
			writeBody(w, 401, `{"error":{"code":"token_required","message":"no token"}}`)
			return true
		case got != "Bearer "+good:
			writeBody(w, 403, `{"error":{"code":"token_invalid","message":"wrong token"}}`)
			return true
		}
		return false
	})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		tokens map[string]string
		tag    string
		code   string // "" for IDs
	}{
		{"its token", map[string]string{"secret": good}, "secret", ""},
		{"another tag's token not sent", map[string]string{"secret": good}, "orders", ""},
		{"no token", nil, "secret", "token_required"},
		{"a wrong token", map[string]string{"secret": "nope"}, "secret", "token_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(ctx, Config{Servers: []string{f.addr}, Tokens: tc.tokens})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			id, err := c.NextSegment(ctx, tc.tag)
			var rej *RejectedError
			switch {
			case tc.code == "" && (err != nil || id < 1):
				t.Fatalf("NextSegment(%q): %d, %v; want an ID", tc.tag, id, err)
			case tc.code != "" && (!errors.Is(err, ErrRejected) || !errors.As(err, &rej) || rej.Code != tc.code):
				t.Fatalf("NextSegment(%q): %v; want ErrRejected with code %s", tc.tag, err, tc.code)
			}
		})
	}
	for _, bad := range []string{"", "a b", "x\r\nX-Evil: 1", string(make([]byte, 513))} {
		if _, err := New(ctx, Config{Servers: []string{f.addr}, Tokens: map[string]string{"secret": bad}}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("token %q: %v, want ErrInvalidConfig", bad, err)
		}
	}
}

// Config.APIToken goes with every request for snowflake IDs and UUIDs.
func TestAPITokenSentForIDs(t *testing.T) {
	const good = "api-token-0123456789"
	f := startFake(t, 1, func(w http.ResponseWriter, r *http.Request, _ int) bool {
		if r.Header.Get("Authorization") != "Bearer "+good {
			writeBody(w, 401, `{"error":{"code":"token_required","message":"no token"}}`)
			return true
		}
		return false
	})
	ctx := context.Background()
	c, err := New(ctx, Config{Servers: []string{f.addr}, APIToken: good})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Next(ctx); err != nil {
		t.Errorf("Next with the API token: %v", err)
	}
	if _, err := c.NextN(ctx, 3); err != nil {
		t.Errorf("NextN with the API token: %v", err)
	}
	none, err := New(ctx, Config{Servers: []string{f.addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = none.Close() })
	var rej *RejectedError
	if _, err := none.Next(ctx); !errors.As(err, &rej) || rej.Code != "token_required" {
		t.Errorf("Next without the API token: %v, want ErrRejected token_required", err)
	}
	if _, err := New(ctx, Config{Servers: []string{f.addr}, APIToken: "a\nb"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("APIToken with a newline: %v, want ErrInvalidConfig", err)
	}
}
