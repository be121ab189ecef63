module github.com/sleeplock/sleeplock/examples/chatturns

go 1.26.8

require (
	github.com/jackc/pgx/v5 v5.13.0
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sync v0.25.0 // indirect
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/text v0.42.0 // indirect
)

require (
	github.com/sleeplock/sleeplock v0.2.0
	github.com/sleeplock/sleeplock/pgstore v0.2.0
	github.com/sleeplock/sleeplock/turns v0.2.0
	go.uber.org/goleak v1.3.0
)
