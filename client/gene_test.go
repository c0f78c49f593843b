package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
)

// geneAnswer answers ?gene=G like a node with 8 gene bits: IDs that end in
// G's low 8 bits; gene_off when off.
func geneAnswer(off bool) func(w http.ResponseWriter, r *http.Request, n int) bool {
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		q := r.URL.Query()
		if !q.Has("gene") {
			return false
		}
		if off {
			writeBody(w, 400, `{"error":{"code":"gene_off","message":"this cluster has no gene bits"}}`)
			return true
		}
		g, err := strconv.ParseUint(q.Get("gene"), 10, 64)
		if err != nil {
			writeBody(w, 400, `{"error":{"code":"invalid_gene","message":"bad"}}`)
			return true
		}
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, "%d\n", int64(1000+i)<<8|int64(g&255))
		}
		writeBody(w, 200, b.String())
		return true
	}
}

// NextGene asks for IDs with the gene and fails over like Next; a cluster
// without gene bits is ErrRejected at once.
func TestNextGene(t *testing.T) {
	down := startFake(t, 1, unavailable)
	good := startFake(t, 2, geneAnswer(false))
	c := newClient(t, Config{Servers: []string{down.addr, good.addr}})
	const user = 1234567890123
	for range 5 {
		id, err := c.NextGene(context.Background(), user)
		if err != nil || id&255 != user&255 {
			t.Fatalf("NextGene(%d) = %d (ends in %d), %v", user, id, id&255, err)
		}
	}
	ids, err := c.NextGeneN(context.Background(), 7, 3)
	if err != nil || len(ids) != 3 || ids[0]&255 != 7 || ids[2] <= ids[0] {
		t.Fatalf("NextGeneN(7, 3) = %v, %v", ids, err)
	}
	if _, err := c.NextGeneN(context.Background(), 7, 0); !errors.Is(err, ErrRejected) {
		t.Errorf("NextGeneN(7, 0): %v, want ErrRejected", err)
	}
	if _, err := c.NextGene(context.Background(), 1<<63); !errors.Is(err, ErrRejected) {
		t.Errorf("NextGene(2^63): %v, want ErrRejected", err)
	}

	off := startFake(t, 3, geneAnswer(true))
	c2 := newClient(t, Config{Servers: []string{off.addr}})
	if _, err := c2.NextGene(context.Background(), 5); !errors.Is(err, ErrRejected) {
		t.Errorf("NextGene on a cluster without gene bits: %v, want ErrRejected", err)
	}
	if n := off.requests.Load(); n != 1 {
		t.Errorf("a gene_off answer was retried: %d requests", n)
	}
}
