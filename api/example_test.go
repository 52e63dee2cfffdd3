package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"stead/api"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store/boltstore"
	"stead/store/fsblob"
)

// Bootstrap makes a project and its first owner key; the key is shown only
// here.
func ExampleBootstrap() {
	dir, _ := os.MkdirTemp("", "stead-example")
	defer os.RemoveAll(dir)
	st, err := boltstore.Open(filepath.Join(dir, "stead.db"), boltstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	p, ownerKey, err := api.Bootstrap(context.Background(), st, "demo", time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Name, strings.HasPrefix(p.ID, "prj_"), strings.HasPrefix(ownerKey, api.KeyPrefix))
	// Output: demo true true
}

// New wires the API over an engine; the Server is an http.Handler.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "stead-example")
	defer os.RemoveAll(dir)
	st, err := boltstore.Open(filepath.Join(dir, "stead.db"), boltstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	blobs, err := fsblob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		fmt.Println(err)
		return
	}
	rt := jsvm.New(jsvm.Options{})
	defer rt.Close()
	pool := engine.NewPool(4, 0, nil)
	eng, err := engine.New(engine.Config{
		Store: st, Blobs: blobs, Invoker: rt, Dispatch: pool,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	pool.Start(eng.Execute)
	defer pool.Stop(context.Background())

	srv, err := api.New(api.Config{Engine: eng, Store: st})
	if err != nil {
		fmt.Println(err)
		return
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/healthz")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.StatusCode, " ", string(body))
	// Output: 200 {"status":"ok"}
}
