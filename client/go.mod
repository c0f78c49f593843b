module codeberg.org/snowflaked/snowflaked/client

go 1.26.0

require github.com/go-zookeeper/zk v1.0.4
