package jsvm

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// call is one invocation's state: what the handler recorded and the
// secrets to redact. Touched only on the VM's goroutine (host goroutines
// get copies of what they need).
type call struct {
	ctx   context.Context
	start time.Time
	rt    *Runtime
	inv   *Invocation

	hostCtx context.Context // ctx for host work, cancelled when the call ends
	cancel  context.CancelFunc

	loading   bool   // the bundle's top level is running
	memBreach string // set by a size-checked built-in
	uncaught  *Error // an error thrown by a timer or microtask callback

	red Redactor

	cost      Cost
	untrusted []string
	logs      []Log
	logBytes  int
	truncated bool
}

const (
	maxUntrusted     = 100
	maxOriginLength  = 2048
	redacted         = "[REDACTED]"
	truncationMarker = "…[truncated]"
)

func newCall(ctx context.Context, rt *Runtime, inv *Invocation, start time.Time) *call {
	c := &call{ctx: ctx, start: start, rt: rt, inv: inv}
	c.red.given = inv.Secrets
	c.red.token = inv.BrokerToken
	return c
}

// Redactor replaces secrets with "[REDACTED]" in what an invocation
// recorded. Runtime.Invoke applies one to every Result; a caller that hands
// a Result across a boundary (a sandbox parent) applies one again with the
// secrets the other side never saw. The zero value redacts nothing.
type Redactor struct {
	token string   // the broker token
	given []string // more secrets, as given
	list  []string // non-empty values to redact, longest first
	built bool
}

// NewRedactor returns a Redactor of secrets (empty ones are ignored).
func NewRedactor(secrets ...string) *Redactor { return &Redactor{given: secrets} }

// Result redacts res's output (see RedactJSON), log lines and untrusted
// origins in place.
func (r *Redactor) Result(res *Result) {
	if res.Output != nil {
		res.Output = r.JSON(res.Output)
	}
	for i := range res.Logs {
		res.Logs[i].Message = r.String(res.Logs[i].Message)
	}
	for i := range res.Untrusted {
		res.Untrusted[i] = r.String(res.Untrusted[i])
	}
}

// secretList returns the secrets to redact, longest first so that a secret
// containing another is redacted whole. It is built on first use: most
// outputs and lines contain no secret, which found needs no list.
func (r *Redactor) secretList() []string {
	if !r.built {
		r.built = true
		if r.token != "" {
			r.list = append(r.list, r.token)
		}
		for _, s := range r.given {
			if s != "" {
				r.list = append(r.list, s)
			}
		}
		sortByLengthDesc(r.list)
	}
	return r.list
}

// found reports whether s contains a secret, as is or as JSON escapes it.
func (r *Redactor) found(s string) bool {
	check := func(sec string) bool {
		return sec != "" && (strings.Contains(s, sec) || (needsEscape(sec) && strings.Contains(s, jsonEscape(sec))))
	}
	if check(r.token) {
		return true
	}
	for _, sec := range r.given {
		if check(sec) {
			return true
		}
	}
	return false
}

func sortByLengthDesc(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && len(s[j]) > len(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// host returns the context for host work started by this call, creating it
// on first use (most calls start none).
func (c *call) host() context.Context {
	if c.hostCtx == nil {
		c.hostCtx, c.cancel = context.WithCancel(c.ctx)
	}
	return c.hostCtx
}

// end cancels host work still in flight.
func (c *call) end() {
	if c.cancel != nil {
		c.cancel()
	}
}

func (c *call) result() Result {
	return Result{Cost: c.cost, Untrusted: c.untrusted, Logs: c.logs, LogsTruncated: c.truncated}
}

// String replaces every secret in s.
func (r *Redactor) String(s string) string {
	if !r.found(s) {
		return s
	}
	for _, sec := range r.secretList() {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return s
}

// Error redacts e's message, name and stack in place.
func (r *Redactor) Error(e *Error) {
	e.Message = r.String(e.Message)
	e.Name = r.String(e.Name)
	e.Stack = r.String(e.Stack)
}

// JSON redacts secrets in string literals (keys included) of a JSON text,
// keeping it valid JSON. A secret that is found outside any string (inside
// a number, say) makes the whole output "[REDACTED]".
func (r *Redactor) JSON(out []byte) []byte {
	if !r.found(unsafe.String(unsafe.SliceData(out), len(out))) {
		return out
	}
	var b bytes.Buffer
	b.Grow(len(out))
	for i := 0; i < len(out); {
		if out[i] != '"' {
			b.WriteByte(out[i])
			i++
			continue
		}
		j := i + 1
		for j < len(out) && out[j] != '"' {
			if out[j] == '\\' {
				j++
			}
			j++
		}
		j = min(j+1, len(out))
		lit := out[i:j]
		var s string
		if err := json.Unmarshal(lit, &s); err != nil {
			return []byte(`"` + redacted + `"`)
		}
		if red := r.String(s); red != s {
			b.WriteString(jsonQuote(red))
		} else {
			b.Write(lit)
		}
		i = j
	}
	res := b.Bytes()
	for _, sec := range r.secretList() {
		if bytes.Contains(res, []byte(sec)) {
			return []byte(`"` + redacted + `"`)
		}
	}
	return res
}

// jsonQuote encodes s as a JSON string the way JSON.stringify does (no
// HTML escaping).
func jsonQuote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// needsEscape reports whether JSON.stringify writes s differently from s.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return true
		}
	}
	return false
}

func jsonEscape(s string) string {
	q := jsonQuote(s)
	return q[1 : len(q)-1]
}

// log records one console line, redacted, within the bounds.
func (c *call) log(level, msg string) {
	o := &c.rt.opts
	if len(c.logs) >= o.MaxLogLines || c.logBytes >= o.MaxLogBytes {
		c.truncated = true
		return
	}
	msg = c.red.String(msg)
	if room := o.MaxLogBytes - c.logBytes; len(msg) > room {
		msg = cutUTF8(msg, room) + truncationMarker
		c.truncated = true
	}
	c.logBytes += len(msg)
	c.logs = append(c.logs, Log{Level: level, Message: msg, At: o.Now()})
}

// logFull reports whether further console lines would be dropped.
func (c *call) logFull() bool {
	o := &c.rt.opts
	if len(c.logs) >= o.MaxLogLines || c.logBytes >= o.MaxLogBytes {
		c.truncated = true
		return true
	}
	return false
}

func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (c *call) markUntrusted(origin string) {
	origin = c.red.String(origin)
	for _, o := range c.untrusted {
		if o == origin {
			return
		}
	}
	if len(c.untrusted) < maxUntrusted {
		c.untrusted = append(c.untrusted, origin)
		if c.inv.OnUntrusted != nil {
			c.inv.OnUntrusted(origin)
		}
	}
}

func (c *call) addCost(ti, to int64, usd float64) {
	c.cost.TokensInput = satAdd(c.cost.TokensInput, ti)
	c.cost.TokensOutput = satAdd(c.cost.TokensOutput, to)
	c.cost.CostUSD += usd
	if math.IsInf(c.cost.CostUSD, 0) {
		c.cost.CostUSD = math.MaxFloat64
	}
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
