module codeberg.org/snowflaked/snowflaked

go 1.26.0

// npm's folders (clients/typescript, tests/openapi/lint) hold no Go: the
// go command never walks them (./... would, and npm rewrites them).
ignore node_modules

require (
	github.com/beevik/ntp v1.6.0
	github.com/bwmarrin/snowflake v0.3.0
	github.com/go-zookeeper/zk v1.0.4
	github.com/rs/zerolog v1.35.1
	github.com/sony/sonyflake/v2 v2.0.0
	github.com/valyala/fasthttp v1.74.0
	golang.org/x/net v0.59.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/go-openapi/jsonpointer v0.22.5 // indirect
	github.com/go-openapi/swag/jsonname v0.25.5 // indirect
	github.com/klauspost/compress v1.20.1 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/molecule-man/go-brrr v1.0.1 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

require (
	codeberg.org/snowflaked/snowflaked/client v0.0.0
	github.com/getkin/kin-openapi v0.153.0
	github.com/google/uuid v1.6.0
	golang.org/x/tools v0.49.0
)

// The client is a module of its own (an application that imports it gets
// the standard library, and the ZooKeeper client only through
// client/zkdiscovery, nothing of the server); here it is the copy beside
// the server.
replace codeberg.org/snowflaked/snowflaked/client => ./client
