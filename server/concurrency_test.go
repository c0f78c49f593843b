package server

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// TestConcurrentUnique: 8 clients × 500 requests mixing /id, /ids and the
// Leaf endpoint over keep-alive connections; every ID is unique and each
// client sees its IDs strictly increase.
func TestConcurrentUnique(t *testing.T) {
	const clients, requests, batch = 8, 500, 3
	f := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	uris := []string{"/id", "/ids?count=" + strconv.Itoa(batch), "/api/snowflake/get/k", "/ids?count=" + strconv.Itoa(batch) + "&format=json", "/id?format=json"}

	results := make([][]int64, clients)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]int64, 0, requests*batch)
			for i := range requests {
				uri := uris[(c+i)%len(uris)]
				got, err := fetchIDs(f, uri)
				if err != nil {
					errs <- fmt.Errorf("client %d request %d %s: %w", c, i, uri, err)
					return
				}
				ids = append(ids, got...)
			}
			results[c] = ids
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := make(map[int64]int, clients*requests*batch)
	total := 0
	for c, ids := range results {
		for i, id := range ids {
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("client %d: ID %d after %d", c, id, ids[i-1])
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("ID %d issued to clients %d and %d", id, prev, c)
			}
			seen[id] = c
		}
		total += len(ids)
	}
	if total < clients*requests {
		t.Fatalf("only %d IDs", total)
	}
}

// fetchIDs does GET uri and parses the IDs of any ID endpoint's body.
func fetchIDs(f *fixture, uri string) ([]int64, error) {
	status, body, err := f.client.Get(nil, "http://snowflaked.test"+uri)
	if err != nil {
		return nil, err
	}
	if status != 200 {
		return nil, fmt.Errorf("status %d: %s", status, body)
	}
	s := string(body)
	var fields []string
	switch {
	case strings.HasPrefix(s, `{"id":`): // {"id":N,"id_str":"N"}
		s = strings.TrimPrefix(s, `{"id":`)
		fields = []string{s[:strings.IndexByte(s, ',')]}
	case strings.HasPrefix(s, "["):
		s = strings.NewReplacer("[", "", "]", "", `"`, "").Replace(s)
		fields = strings.Split(s, ",")
	default:
		fields = strings.Fields(s)
	}
	ids := make([]int64, 0, len(fields))
	for _, fl := range fields {
		id, err := strconv.ParseInt(fl, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("body %q: %w", body, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
