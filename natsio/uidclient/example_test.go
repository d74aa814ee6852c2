package uidclient_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// The package doc's example, compiled.
func ExampleNew() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	ids := uidclient.New(nc, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, err := ids.Next(ctx) // or ids.Batch(ctx, 1000)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id)
}
