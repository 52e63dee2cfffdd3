package mcpclient

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Go SDK's client (github.com/modelcontextprotocol/go-sdk), the other
// official client the tests drive POST /mcp with. It has no tasks support
// yet (go-sdk#942): tasks/get and tasks/cancel are custom methods here.

// GoOptions are ConnectGo's options.
type GoOptions struct {
	// Tasks declares the io.modelcontextprotocol/tasks extension on every
	// request.
	Tasks bool
	// Transport makes the HTTP requests (http.DefaultTransport if nil): the
	// api tests check each exchange against the OpenAPI document there.
	Transport http.RoundTripper
}

// ConnectGo connects the Go SDK's client to endpoint with an MCP key sent
// as Authorization: Bearer.
func ConnectGo(ctx context.Context, endpoint, key string, o GoOptions) (*mcp.ClientSession, error) {
	opts := &mcp.ClientOptions{}
	if o.Tasks {
		caps := &mcp.ClientCapabilities{}
		caps.AddExtension("io.modelcontextprotocol/tasks", nil)
		opts.Capabilities = caps
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "stead-test", Version: "1"}, opts)
	if err := mcp.AddSendingCustomMethod[*TaskParams, *Task](c, "tasks/get"); err != nil {
		return nil, err
	}
	if err := mcp.AddSendingCustomMethod[*TaskParams, *Ack](c, "tasks/cancel"); err != nil {
		return nil, err
	}
	base := o.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: Bearer{Key: key, Base: base}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
}

// Bearer adds Authorization: Bearer Key to every request.
type Bearer struct {
	Key  string
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Key)
	return b.Base.RoundTrip(r)
}

// TaskParams are the params of tasks/get and tasks/cancel.
type TaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// Task is a task of the tasks extension, as tools/call (resultType "task")
// and tasks/get ("complete") answer it.
type Task struct {
	mcp.ResultBase
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result"`
}

// Ack is tasks/cancel's empty result.
type Ack struct {
	mcp.ResultBase
}

// GetTask sends tasks/get.
func GetTask(ctx context.Context, cs *mcp.ClientSession, id string) (*Task, error) {
	return mcp.CallCustomMethod[*TaskParams, *Task](ctx, cs, "tasks/get", &TaskParams{TaskID: id})
}

// CancelTask sends tasks/cancel.
func CancelTask(ctx context.Context, cs *mcp.ClientSession, id string) error {
	_, err := mcp.CallCustomMethod[*TaskParams, *Ack](ctx, cs, "tasks/cancel", &TaskParams{TaskID: id})
	return err
}

// CallID is the call (run) id a call result or task names in its _meta
// (io.getstead/callId); "" when none.
func CallID(meta mcp.Meta) string {
	id, _ := meta["io.getstead/callId"].(string)
	return id
}
