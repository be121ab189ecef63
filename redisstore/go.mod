module github.com/sleeplock/sleeplock/redisstore

go 1.26.8

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sleeplock/sleeplock v0.2.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
