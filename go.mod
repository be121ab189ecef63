module github.com/sleeplock/sleeplock

go 1.26.8

require (
	github.com/anishathalye/porcupine v1.3.1
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sync v0.25.0
)

require github.com/stretchr/testify v1.12.1 // indirect
