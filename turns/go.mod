module github.com/sleeplock/sleeplock/turns

go 1.26.8

require (
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)

require github.com/sleeplock/sleeplock v0.2.0
