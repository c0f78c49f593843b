// Command barehttp is the baseline for `make bench`: a bare fasthttp server
// that answers every request with a constant, configured like snowflaked's
// server, so the difference measures only snowflaked's own work.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	body := []byte("123456789012345678")
	srv := &fasthttp.Server{
		Name:        "barehttp",
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second,
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/plain; charset=utf-8")
			ctx.SetBody(body)
		},
	}
	if err := srv.ListenAndServe(*listen); err != nil {
		fmt.Fprintln(os.Stderr, "barehttp:", err)
		os.Exit(1)
	}
}
