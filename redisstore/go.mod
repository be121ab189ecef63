module github.com/sleeplock/sleeplock/redisstore

go 1.26.8

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sleeplock/sleeplock v0.2.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	go.uber.org/atomic v1.12.0 // indirect
)
