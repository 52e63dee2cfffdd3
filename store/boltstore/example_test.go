package boltstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"stead/store"
	"stead/store/boltstore"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "stead")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := boltstore.Open(filepath.Join(dir, ".stead", "stead.db"), boltstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := store.Run{ID: "run_1", ProjectID: "proj_1", Agent: "support", Status: store.RunQueued, CreatedAt: now}
	r, err = s.CreateRun(ctx, r, []store.Event{{Type: "run.created", At: now}})
	if err != nil {
		log.Fatal(err)
	}
	r, err = s.ClaimRun(ctx, store.ClaimParams{RunID: r.ID, Owner: "worker-1", Now: now, Until: now.Add(time.Minute)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Status, r.LeaseOwner, r.Version)

	// A second claim while the lease is live loses.
	_, err = s.ClaimRun(ctx, store.ClaimParams{RunID: r.ID, Owner: "worker-2", Now: now, Until: now.Add(time.Minute)})
	fmt.Println(err)
	// Output:
	// running worker-1 2
	// claim run run_1: conflict
}
