module codeberg.org/snowflaked/snowflaked/client

go 1.26.0

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/rs/zerolog v1.35.1
)

require (
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
