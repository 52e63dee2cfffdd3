package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"stead/runtime/agent"
	"stead/runtime/bundle"
	"stead/runtime/jsvm"
	"stead/runtime/mcptool"
	"stead/store"
)

// CodeToolChanged: an MCP-backed tool's definition on its server is not
// the one its deployment pinned (or the server no longer lists it). The
// step fails closed until a redeploy pins the new definition.
const CodeToolChanged = "tool-changed"

// MCPOptions configure how MCP-backed tools reach their servers. The zero
// value works: the models' egress policy (Models.Egress, the owner's, as
// for handlers' fetch) and their environment lookup (Models.LookupEnv).
type MCPOptions struct {
	// HTTPClient, when set, replaces Models.Egress.Client() for every MCP
	// request (tests).
	HTTPClient *http.Client
	// LookupEnv reads the variables headersFromEnv names; Models.LookupEnv
	// when nil (on AWS it refuses the variables Lambda and Stead set).
	LookupEnv func(name string) (string, bool)
	// ListTimeout bounds a deploy's listing of one server's tools; 15s
	// when zero.
	ListTimeout time.Duration
}

func (o *MCPOptions) defaults(m ModelOptions) {
	if o.LookupEnv == nil {
		o.LookupEnv = m.LookupEnv
	}
	if o.ListTimeout <= 0 {
		o.ListTimeout = 15 * time.Second
	}
}

func newMCPClient(cfg Config) *mcptool.Client {
	return mcptool.New(mcptool.Options{HTTPClient: cfg.MCP.HTTPClient, Egress: cfg.Models.Egress})
}

// mcpServer is a declared server with its headers read from the
// environment; missing names the variables that are not set, by header.
func (e *Engine) mcpServer(s *agent.MCPServer) (srv mcptool.Server, missing map[string]string) {
	srv = mcptool.Server{Name: s.Name, URL: s.URL, Headers: map[string]string{}}
	for h, env := range s.HeadersFromEnv {
		v, ok := e.cfg.MCP.LookupEnv(env)
		if !ok || v == "" {
			if missing == nil {
				missing = map[string]string{}
			}
			missing[h] = env
			continue
		}
		srv.Headers[h] = v
	}
	return srv, missing
}

// pinMCP fetches the definition of every MCP-backed tool cfg declares and
// returns them as pins, each marked with how it differs from prev's. A
// variable headersFromEnv names that is not set here, a server that cannot
// be used and a declared tool a server does not list are *agent.ConfigError
// problems. It also gives the tools without schemas the remote ones.
func (e *Engine) pinMCP(ctx context.Context, cfg *agent.Config, prev []store.MCPToolPin) ([]store.MCPToolPin, error) {
	byServer := map[string][]*agent.Tool{}
	for _, t := range cfg.MCPTools() {
		byServer[t.MCP.Server] = append(byServer[t.MCP.Server], t)
	}
	var (
		problems []agent.Problem
		pins     []store.MCPToolPin
	)
	for _, name := range slices.Sorted(maps.Keys(byServer)) {
		s, _ := cfg.MCPServer(name)
		srv, missing := e.mcpServer(s)
		if len(missing) > 0 {
			for _, h := range slices.Sorted(maps.Keys(missing)) {
				problems = append(problems, agent.Problem{Pointer: agent.MCPHeaderPointer(name, h), Message: fmt.Sprintf(
					"environment variable %s is not set where this deploy runs; set it (on AWS, on the API function and the runner too: template.yaml passes MCP_AUTH from the McpAuth parameter) to the %s header's value, then deploy again", missing[h], h)})
			}
			continue
		}
		var remote []string
		for _, t := range byServer[name] {
			if !slices.Contains(remote, t.MCP.Name) {
				remote = append(remote, t.MCP.Name)
			}
		}
		slices.Sort(remote)
		lctx, cancel := context.WithTimeout(ctx, e.cfg.MCP.ListTimeout)
		defs, err := e.mcp.Definitions(lctx, srv, remote)
		cancel()
		var me *mcptool.MissingError
		switch {
		case errors.As(err, &me):
			for _, t := range byServer[name] {
				if slices.Contains(me.Tools, t.MCP.Name) {
					problems = append(problems, agent.Problem{Pointer: agent.MCPToolPointer(t.Agent, t.Name), Message: fmt.Sprintf(
						"MCP server %s does not list a tool %q (it lists: %s); correct \"name\", or remove the tool", name, t.MCP.Name, listOrNone(me.Listed))})
				}
			}
			continue
		case err != nil:
			problems = append(problems, agent.Problem{Pointer: agent.MCPServerPointer(name), Message: fmt.Sprintf(
				"deploy could not list the server's tools to pin them: %v", err)})
			continue
		}
		for _, rn := range remote {
			d := defs[rn]
			pin := store.MCPToolPin{
				Server: name, Tool: rn, Fingerprint: d.Fingerprint(), Description: d.Description,
				InputSchema: d.InputSchema, OutputSchema: d.OutputSchema, Change: "new",
			}
			if was, ok := findPin(prev, name, rn); ok {
				pin.Change = strings.Join(mcptool.Changes(pinDefinition(was), d), ", ")
			}
			pins = append(pins, pin)
		}
	}
	if len(problems) > 0 {
		return nil, cfg.Refuse(problems...)
	}
	if err := adoptPins(cfg, pins); err != nil {
		return nil, err
	}
	return pins, nil
}

// adoptPins gives cfg's MCP-backed tools their pinned definitions: the
// remote schemas where they declare none, and the fingerprint.
func adoptPins(cfg *agent.Config, pins []store.MCPToolPin) error {
	if len(pins) == 0 {
		return nil
	}
	return cfg.AdoptRemote(func(ref agent.MCPRef) agent.RemoteTool {
		p, _ := findPin(pins, ref.Server, ref.Name)
		return agent.RemoteTool{InputSchema: p.InputSchema, OutputSchema: p.OutputSchema, Fingerprint: p.Fingerprint}
	})
}

// pinChanges are the warnings that show a deploy's output what changed:
// one per tool whose pinned definition differs from the previous
// deployment's.
func pinChanges(cfg *agent.Config, pins []store.MCPToolPin) []agent.Problem {
	var out []agent.Problem
	for _, t := range cfg.MCPTools() {
		p, ok := findPin(pins, t.MCP.Server, t.MCP.Name)
		if !ok || p.Change == "" || p.Change == "new" {
			continue
		}
		out = append(out, agent.Problem{Pointer: agent.MCPToolPointer(t.Agent, t.Name), Message: fmt.Sprintf(
			"the definition of %s on MCP server %s changed since the previous deployment (%s); this deployment pins the new one (%s): review what the tool now does",
			p.Tool, p.Server, p.Change, p.Fingerprint)})
	}
	return out
}

func findPin(pins []store.MCPToolPin, server, tool string) (store.MCPToolPin, bool) {
	for _, p := range pins {
		if p.Server == server && p.Tool == tool {
			return p, true
		}
	}
	return store.MCPToolPin{}, false
}

func pinDefinition(p store.MCPToolPin) mcptool.Definition {
	return mcptool.Definition{Name: p.Tool, Description: p.Description, InputSchema: p.InputSchema, OutputSchema: p.OutputSchema}
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// callMCP is invoke for an MCP-backed tool: the call goes to the remote
// server, checked against the pinned definition, with the call's
// idempotency key in _meta, and is recorded as a handler's would be. A
// server that cannot be reached requeues the step as a retryable handler
// error does, until its last attempt; a changed definition fails the run
// with CodeToolChanged.
func (x *execution) callMCP(ctx, callCtx context.Context, s *agent.Step, tool *agent.Tool, inputJSON json.RawMessage, key string, names traceNames, started time.Time) (handlerCall, error) {
	ref := *tool.MCP
	pin, ok := findPin(x.dep.MCPTools, ref.Server, ref.Name)
	if !ok {
		return handlerCall{}, x.fail(ctx, s.ID, CodeToolChanged, fmt.Sprintf(
			"deployment %d holds no pinned definition of %s on MCP server %s; deploy again to pin it", x.run.Deployment, ref.Name, ref.Server))
	}
	decl, _ := x.dep.config.MCPServer(ref.Server)
	srv, missing := x.e.mcpServer(decl)
	for _, v := range srv.Headers {
		x.secrets.add(v)
		if i := strings.LastIndexByte(v, ' '); i >= 0 && len(v)-i > 8 {
			x.secrets.add(v[i+1:]) // the token of "Bearer <token>"
		}
	}
	if len(missing) > 0 {
		var vars []string
		for _, h := range slices.Sorted(maps.Keys(missing)) {
			vars = append(vars, missing[h])
		}
		return handlerCall{code: CodeHandlerError, msg: fmt.Sprintf(
			"%s cannot call MCP server %s: environment variable %s is not set where this run runs (headersFromEnv); set it on the server or runner",
			tool.Name, ref.Server, strings.Join(vars, ", "))}, nil
	}
	res, err := x.e.mcp.Call(callCtx, srv, mcptool.Call{Tool: ref.Name, Arguments: inputJSON, IdempotencyKey: key, Fingerprint: pin.Fingerprint})
	if ctx.Err() != nil {
		return handlerCall{}, errStop
	}
	hc := handlerCall{took: x.e.now().Sub(started)}
	hc.untrusted = tool.Source == agent.SourceExternal
	if tool.Source == agent.SourceExternal {
		x.lowerTrust("tool:"+tool.Name, s.ID)
	}
	var (
		changed *mcptool.ChangedError
		missed  *mcptool.MissingError
		down    *mcptool.UnavailableError
	)
	switch {
	case errors.As(err, &changed), errors.As(err, &missed):
		return hc, x.fail(ctx, s.ID, CodeToolChanged, fmt.Sprintf("%s: %v", tool.Name, err))
	case errors.As(err, &down) && down.Retryable:
		if x.run.Attempts < x.e.maxAttempts() {
			return hc, x.requeue(ctx, s.ID, tool.Name, err.Error())
		}
		hc.code, hc.msg = CodeHandlerError, fmt.Sprintf("%s failed after %d attempts: %v", tool.Name, x.run.Attempts, err)
		return hc, nil
	case errors.Is(err, context.DeadlineExceeded) || callCtx.Err() != nil:
		hc.code, hc.msg = CodeTimeout, fmt.Sprintf("%s timed out after %s", tool.Name, tool.Timeout)
		return hc, nil
	case err != nil:
		hc.code, hc.msg = CodeHandlerError, fmt.Sprintf("%s failed: %v", tool.Name, err)
		return hc, nil
	case res.IsError:
		msg := res.Text
		if msg == "" {
			msg = "the tool reported an error (isError) without text"
		}
		hc.code, hc.msg = CodeHandlerError, fmt.Sprintf("%s failed: %s", tool.Name, msg)
		return hc, nil
	}
	if len(res.Output) > jsvm.DefaultMaxResultSize {
		hc.code, hc.msg = CodeInvalidOutput, fmt.Sprintf("%s's result is %s as JSON, over the %s limit",
			tool.Name, bundle.FormatSize(int64(len(res.Output))), bundle.FormatSize(jsvm.DefaultMaxResultSize))
		return hc, nil
	}
	return x.accept(s, tool, hc, res.Output, key, names), nil
}
