package otelevents_test

import (
	"context"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/otelevents"
)

// Metrics through an OpenTelemetry MeterProvider (here the SDK's, with a
// manual reader; in production, the one your exporter set up).
func Example() {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	locks := sleeplock.New(nil)
	defer locks.Close()
	m, err := otelevents.New(mp.Meter("sleeplock"), locks) // observed at each collection
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
}
