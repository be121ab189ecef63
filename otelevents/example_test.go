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
	m, err := otelevents.New(mp.Meter("sleeplock"))
	if err != nil {
		log.Fatal(err)
	}
	locks := sleeplock.New(nil, sleeplock.WithNotifier(m))
	defer locks.Close()
	reg, err := m.Track(locks) // slots, running, waiting per lock family
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Unregister()
}
