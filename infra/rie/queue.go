package rie

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Queue stands in for the Lambda service's Invoke API
// (POST /2015-03-31/functions/{name}/invocations) for asynchronous
// invocations: it answers 202 Accepted and holds each event, by function
// name, until the test takes it. Point a function's SDK at URL with
// AWS_ENDPOINT_URL_LAMBDA. It does not check signatures.
//
// The real service would run the target at once, possibly concurrently
// and possibly twice; a test takes the queued events and invokes the
// target's Instance with them, one at a time, in the order it chooses.
type Queue struct {
	// URL is the Invoke API's endpoint, http://127.0.0.1:PORT.
	URL string

	mu      sync.Mutex
	events  map[string][][]byte
	refused map[string]string
	count   map[string]int
	srv     *http.Server
}

// StartQueue starts a Queue on a free loopback port until the test ends.
func StartQueue(t testing.TB) *Queue {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen for the Lambda stand-in: %v", err)
	}
	q := &Queue{URL: "http://" + l.Addr().String(), events: map[string][][]byte{}, refused: map[string]string{}, count: map[string]int{}}
	q.srv = &http.Server{Handler: q, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = q.srv.Serve(l) }()
	t.Cleanup(func() { _ = q.srv.Close() })
	return q
}

// Refuse makes invocations of function fail with AccessDeniedException
// (HTTP 403, which the SDK does not retry) when message is not empty, as
// the service does when the caller lacks lambda:InvokeFunction; an empty
// message accepts them again.
func (q *Queue) Refuse(function, message string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if message == "" {
		delete(q.refused, function)
		return
	}
	q.refused[function] = message
}

// Take removes and returns the events queued for function, oldest first.
func (q *Queue) Take(function string) [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events[function]
	delete(q.events, function)
	return evs
}

// Requests counts the Invoke requests for function, refused ones included.
func (q *Queue) Requests(function string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.count[function]
}

func (q *Queue) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
	name, ok2 := strings.CutSuffix(rest, "/invocations")
	if r.Method != http.MethodPost || !ok || !ok2 || name == "" || strings.Contains(name, "/") {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("this stand-in serves POST /2015-03-31/functions/{name}/invocations only (got %s %s)", r.Method, r.URL.Path))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil {
		lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.count[name]++
	switch {
	case q.refused[name] != "":
		lambdaError(w, http.StatusForbidden, "AccessDeniedException", q.refused[name])
	case r.Header.Get("X-Amz-Invocation-Type") != "Event":
		lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException",
			fmt.Sprintf("this stand-in takes asynchronous invocations only (X-Amz-Invocation-Type: Event), got %q", r.Header.Get("X-Amz-Invocation-Type")))
	case len(body) > 1<<20:
		lambdaError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException", "an asynchronous event carries at most 1 MB")
	case !json.Valid(body):
		lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", "could not parse the request body into json")
	default:
		q.events[name] = append(q.events[name], body)
		w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("queue-%d", q.count[name]))
		w.WriteHeader(http.StatusAccepted)
	}
}

// lambdaError answers like the service: the error's type in
// X-Amzn-ErrorType and a JSON body.
func lambdaError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}
