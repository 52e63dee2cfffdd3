package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
)

// The protocol between a parent and its worker: frames over two pipes (see
// channel.go), each a 4-byte big-endian length and one JSON message,
// written in one write (the frames of every call encoded by hand, see
// codec.go) and parsed strictly (exact member names, unknown or duplicate
// names refused, valid UTF-8). Version 2 (1 was the same frames over one
// Unix socket):
//
//	worker → parent   ready{v}                      once, at start
//	parent → worker   load{name, source, exports}   once, before the first call
//	worker → parent   loaded{error?}
//	                  (or load{…, list} → loaded{exports | error}, and the
//	                  worker is done: listing evaluates the top level)
//	parent → worker   call{…}                       one at a time
//	worker → parent   host{id, op, …}               broker and fetch requests
//	parent → worker   reply{id, …}                  one per host request
//	worker → parent   untrusted{origin}             at once, per new mark
//	parent → worker   cancel                        the call's ctx ended
//	worker → parent   done{result, error?}          ends the call
//
// The parent trusts nothing a worker sends: a frame over maxWorkerFrame, a
// message that does not parse, one that is not expected now (a host request
// with no call running, a second done, a reply id it never asked for), or
// more host requests than maxHostCalls kill the worker; its call fails with
// jsvm.CodeSandboxCrashed naming the violation.
const protocolVersion = 2

const (
	// maxWorkerFrame bounds a frame from a worker: the result, the logs and
	// a fetch body fit well within it.
	maxWorkerFrame = 8 << 20
	// maxParentFrame bounds a frame from the parent, as the worker reads it
	// (a load carries the bundle, at most bundle.DefaultMaxSize… and base64).
	maxParentFrame = 64 << 20
	// maxHostCalls bounds the host requests (broker, fetch) of one call, and
	// maxHostInFlight those waiting for their reply at once.
	maxHostCalls    = 10000
	maxHostInFlight = 64
	// maxFetchBody bounds the body of one fetch request, maxFetchInFlight
	// the fetches of one call awaiting their response at once (so a call
	// holds at most 8 × (2 MiB out + 2 MiB in) of the parent's memory).
	maxFetchBody     = 2 << 20
	maxFetchInFlight = 8
	// maxBrokerValue bounds a value a handler stores (the API's body
	// limit), maxListBytes what one list returns.
	maxBrokerValue = 1 << 20
	maxListBytes   = 16 << 20
)

// Message types.
const (
	msgReady     = "ready"
	msgLoad      = "load"
	msgLoaded    = "loaded"
	msgCall      = "call"
	msgHost      = "host"
	msgReply     = "reply"
	msgUntrusted = "untrusted"
	msgCancel    = "cancel"
	msgDone      = "done"
)

// Host operations.
const (
	opGet    = "broker.get"
	opPut    = "broker.put"
	opDelete = "broker.delete"
	opList   = "broker.list"
	opFetch  = "fetch"
)

// message is every frame's shape: T names the type, and the fields of that
// type are set.
type message struct {
	T string `json:"t"`
	// V is the protocol version (ready).
	V int `json:"v,omitzero"`
	// ID pairs a host request with its reply.
	ID uint64 `json:"id,omitzero"`
	// Seq numbers a worker's calls from 1: every frame of a call (call,
	// host, reply, untrusted, cancel, done) carries its call's number.
	Seq uint64 `json:"seq,omitzero"`

	Load   *loadMsg  `json:"load,omitzero"`
	Call   *callMsg  `json:"call,omitzero"`
	Host   *hostMsg  `json:"host,omitzero"`
	Reply  *replyMsg `json:"reply,omitzero"`
	Origin string    `json:"origin,omitzero"`
	Done   *doneMsg  `json:"done,omitzero"`
	Error  *errorMsg `json:"error,omitzero"`
	// Exports answer a load that asked for them (loaded).
	Exports []bundle.Export `json:"exports,omitzero"`
}

// loadMsg hands the worker its bundle. Exports are the parent's listing
// (made at deploy), so the worker need not evaluate the top level twice.
type loadMsg struct {
	Name    string          `json:"name"`
	Source  []byte          `json:"source"`
	Exports []bundle.Export `json:"exports"`
	Limits  limitsMsg       `json:"limits"`
	// List asks the worker to evaluate the top level and list the exports
	// (Exports is then empty) instead of serving calls.
	List bool `json:"list,omitzero"`
}

// limitsMsg are the jsvm limits the worker applies inside the VM.
type limitsMsg struct {
	MemoryLimit   int64 `json:"memoryLimit"`
	MaxResultSize int   `json:"maxResultSize"`
	MaxInputSize  int   `json:"maxInputSize"`
	MaxLogLines   int   `json:"maxLogLines"`
	MaxLogBytes   int   `json:"maxLogBytes"`
}

// callMsg is one invocation, without the parent's secrets and broker.
type callMsg struct {
	Export         string         `json:"export"`
	Input          jsontext.Value `json:"input,omitzero"`
	RunID          string         `json:"runId,omitzero"`
	StepID         string         `json:"stepId,omitzero"`
	StepIndex      int            `json:"stepIndex,omitzero"`
	EndUserID      string         `json:"endUserId,omitzero"`
	IdempotencyKey string         `json:"idempotencyKey,omitzero"`
	BrokerToken    string         `json:"brokerToken,omitzero"`
	// Broker says whether context.broker is backed (calls reject otherwise).
	Broker bool `json:"broker,omitzero"`
	// Deadline is the call's deadline in Unix milliseconds; 0 for none.
	Deadline int64 `json:"deadline,omitzero"`
}

// hostMsg is a broker or fetch request from the worker.
type hostMsg struct {
	Op         string             `json:"op"`
	Collection string             `json:"collection,omitzero"`
	Key        string             `json:"key,omitzero"`
	Value      jsontext.Value     `json:"value,omitzero"`
	Fetch      *jsvm.FetchRequest `json:"fetch,omitzero"`
}

// replyMsg answers a host request: Error, or the op's result.
type replyMsg struct {
	Error string              `json:"error,omitzero"`
	Value jsontext.Value      `json:"value,omitzero"`
	Found bool                `json:"found,omitzero"`
	Items []brokerItem        `json:"items,omitzero"`
	Fetch *jsvm.FetchResponse `json:"fetch,omitzero"`
}

type brokerItem struct {
	Key   string         `json:"key"`
	Value jsontext.Value `json:"value"`
}

// doneMsg ends a call.
type doneMsg struct {
	Output        jsontext.Value `json:"output,omitzero"`
	Error         *errorMsg      `json:"error,omitzero"`
	Cost          costMsg        `json:"cost,omitzero"`
	Untrusted     []string       `json:"untrusted,omitzero"`
	Logs          []logMsg       `json:"logs,omitzero"`
	LogsTruncated bool           `json:"logsTruncated,omitzero"`
	// Retired: the worker's VM is spent; the parent retires the worker.
	Retired bool `json:"retired,omitzero"`
}

type costMsg struct {
	TokensInput  int64   `json:"tokensInput,omitzero"`
	TokensOutput int64   `json:"tokensOutput,omitzero"`
	CostUSD      float64 `json:"costUsd,omitzero"`
}

type logMsg struct {
	Level   string `json:"level"`
	Message string `json:"message"`
	// At is in Unix microseconds.
	At int64 `json:"at"`
}

// errorMsg is a *jsvm.Error or a *bundle.Error on the wire.
type errorMsg struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Name    string `json:"name,omitzero"`
	Stack   string `json:"stack,omitzero"`
	// File, Line and Column place a bundle error: File is the bundle's
	// name or, through its source map, one of its sources.
	File   string `json:"file,omitzero"`
	Line   int    `json:"line,omitzero"`
	Column int    `json:"column,omitzero"`
}

var strict = json.JoinOptions(json.RejectUnknownMembers(true))

// errFrameTooLarge is a frame over the reader's limit.
var errFrameTooLarge = errors.New("frame too large")

// writeFrame writes m as one frame to w, in one write, encoding into buf's
// storage.
func writeFrame(w io.Writer, buf *[]byte, m *message) error {
	a, err := appendMessage(append((*buf)[:0], 0, 0, 0, 0), m)
	if err != nil {
		return fmt.Errorf("encode %s frame: %w", m.T, err)
	}
	binary.BigEndian.PutUint32(a, uint32(len(a)-4))
	*buf = a
	_, err = w.Write(a)
	return err
}

// appender is an io.Writer that appends to itself.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}

// readFrame reads one frame of at most limit bytes into buf's storage and
// decodes it strictly into m.
func readFrame(r io.Reader, buf *[]byte, limit int, m *message) error {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(head[:])
	if int64(n) > int64(limit) {
		return fmt.Errorf("%w: %d bytes, over the %d-byte limit", errFrameTooLarge, n, limit)
	}
	if cap(*buf) < int(n) {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	*m = message{}
	if err := json.Unmarshal(b, m, strict); err != nil {
		return fmt.Errorf("malformed frame: %w", err)
	}
	return nil
}

func toErrorMsg(e *jsvm.Error) *errorMsg {
	return &errorMsg{Code: e.Code, Message: e.Message, Name: e.Name, Stack: e.Stack}
}
