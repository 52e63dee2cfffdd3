package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MCPServer is one entry of "mcpServers": a remote MCP server, reached over
// Streamable HTTP, whose tools agents declare with "mcp".
type MCPServer struct {
	// Name is the key in mcpServers; tools refer to it.
	Name string
	// URL is the server's MCP endpoint (http or https).
	URL string
	// HeadersFromEnv maps a header sent with every request to the
	// environment variable that holds its value (headersFromEnv).
	HeadersFromEnv map[string]string
}

// MCPRef says which remote tool an MCP-backed tool is.
type MCPRef struct {
	// Server names the server (a key of Config.MCPServers).
	Server string
	// Name is the tool's name on that server ("name", default the tool's
	// key).
	Name string
}

// MCPServerNames returns the declared MCP server names, sorted.
func (c *Config) MCPServerNames() []string { return slices.Sorted(maps.Keys(c.MCPServers)) }

// MCPServer returns the MCP server with the given name.
func (c *Config) MCPServer(name string) (*MCPServer, bool) {
	s, ok := c.MCPServers[name]
	return s, ok
}

// MCPTools returns every MCP-backed tool of the config, by agent then tool
// name.
func (c *Config) MCPTools() []*Tool {
	var out []*Tool
	for _, an := range c.AgentNames() {
		a := c.Agents[an]
		for _, tn := range a.ToolNames() {
			if t := a.Tools[tn]; t.MCP != nil {
				out = append(out, t)
			}
		}
	}
	return out
}

// RemoteTool is what a deployment pinned of an MCP-backed tool's remote
// definition.
type RemoteTool struct {
	// InputSchema and OutputSchema are the server's (nil when it gave none).
	InputSchema, OutputSchema json.RawMessage
	// Fingerprint identifies the definition; it is part of the tool's
	// PostureDigest, so remembered decisions end when it changes.
	Fingerprint string
}

// AdoptRemote gives each MCP-backed tool its pinned remote definition
// (remote returns it): the remote schemas where stead.json declares no
// input or output schema, and the fingerprint. It must be called before the
// Config is shared (the engine does it as it deploys and as it loads a
// deployment). A remote schema that does not compile is a *ConfigError
// naming the tool.
func (c *Config) AdoptRemote(remote func(ref MCPRef) RemoteTool) error {
	var problems []Problem
	for _, t := range c.MCPTools() {
		rt := remote(*t.MCP)
		in, out := rt.InputSchema, rt.OutputSchema
		t.pinned = rt.Fingerprint
		ptr := jsonPointer("agents", t.Agent, "tools", t.Name)
		adopt := func(raw json.RawMessage, what string) (*jsonschema.Schema, json.RawMessage) {
			if len(raw) == 0 {
				return nil, nil
			}
			v, err := decodeJSON(raw)
			if err != nil {
				problems = append(problems, Problem{Pointer: ptr, Message: fmt.Sprintf("the %s of %s/%s on the server is not JSON: %v", what, t.MCP.Server, t.MCP.Name, err)})
				return nil, nil
			}
			sch, ps := compileSchema(ptr, v)
			problems = append(problems, remoteSchemaProblems(ps, t, what)...)
			return sch, raw
		}
		if t.input == nil {
			if sch, raw := adopt(in, "inputSchema"); sch != nil {
				t.input, t.InputSchema = sch, raw
			}
		}
		if t.output == nil {
			if sch, raw := adopt(out, "outputSchema"); sch != nil {
				t.output, t.OutputSchema = sch, raw
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	if c.pos != nil {
		problems = c.pos.locate(problems)
	}
	return &ConfigError{Problems: problems}
}

// remoteSchemaProblems says that a remote tool's schema did not compile.
func remoteSchemaProblems(ps []Problem, t *Tool, what string) []Problem {
	for i := range ps {
		ps[i].Message = fmt.Sprintf("the %s of %s/%s on the server: %s; declare %q in stead.json to use your own", what, t.MCP.Server, t.MCP.Name, ps[i].Message, map[string]string{"inputSchema": "input", "outputSchema": "output"}[what])
	}
	return ps
}

// reservedHeaders are headers the MCP transport sets itself.
var reservedHeaders = map[string]bool{
	"accept": true, "content-type": true, "content-length": true, "host": true, "connection": true,
	"transfer-encoding": true, "mcp-session-id": true, "mcp-protocol-version": true, "last-event-id": true,
}

func (p *parser) mcpServers(doc map[string]any) map[string]*MCPServer {
	out := map[string]*MCPServer{}
	servers, _ := doc["mcpServers"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		sm, ok := servers[name].(map[string]any)
		if !ok {
			continue
		}
		ptr := jsonPointer("mcpServers", name)
		s := &MCPServer{Name: name, HeadersFromEnv: map[string]string{}}
		s.URL, _ = sm["url"].(string)
		if s.URL != "" {
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				p.report(child(ptr, "url"), fmt.Sprintf("must be an http or https URL such as https://tracker.example.com/mcp (got %q)", s.URL))
			} else if u.User != nil {
				p.report(child(ptr, "url"), `must not hold credentials; send them in a header whose value an environment variable holds: "headersFromEnv": {"Authorization": "TRACKER_AUTH"}`)
			}
		}
		headers, _ := sm["headersFromEnv"].(map[string]any)
		seen := map[string]string{}
		for _, h := range slices.Sorted(maps.Keys(headers)) {
			hptr := child(child(ptr, "headersFromEnv"), h)
			env, ok := headers[h].(string)
			if !ok {
				continue
			}
			switch {
			case !headerName(h):
				p.report(hptr, fmt.Sprintf("%q is not an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)", h))
				continue
			case reservedHeaders[strings.ToLower(h)]:
				p.report(hptr, fmt.Sprintf("%q is a header the MCP transport sets itself; it cannot be configured", h))
				continue
			case seen[strings.ToLower(h)] != "":
				p.report(hptr, fmt.Sprintf("header %q is already set by %q (header names are case-insensitive)", h, seen[strings.ToLower(h)]))
				continue
			case ReservedEnv(env):
				p.report(hptr, fmt.Sprintf(
					"%q is a variable the platform or Stead sets (AWS_…, LAMBDA_…, STEAD_…, _…), never a header value: a config could send the server's own credentials to its url; put the value in a variable of your own, e.g. TRACKER_AUTH", env))
				continue
			}
			seen[strings.ToLower(h)] = h
			s.HeadersFromEnv[h] = env
		}
		out[name] = s
	}
	return out
}

// headerName reports whether h is an HTTP field name (RFC 9110 token).
func headerName(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

// mcpTool reads a tool's "mcp" and "name" at ptr: the tool is MCP-backed
// when "mcp" is set, and its source defaults to external.
func (p *parser) mcpTool(t *Tool, m map[string]any, ptr string, servers map[string]*MCPServer) {
	server, hasMCP := m["mcp"].(string)
	remote, hasName := m["name"].(string)
	if !hasMCP {
		if hasName {
			p.report(child(ptr, "name"), `"name" is the name of an MCP-backed tool on its server; it needs "mcp", the server that runs it`)
		}
		return
	}
	if _, ok := servers[server]; !ok && server != "" {
		list := `no servers are declared; add an "mcpServers" section`
		if len(servers) > 0 {
			list = "declared: " + strings.Join(slices.Sorted(maps.Keys(servers)), ", ")
		}
		p.report(child(ptr, "mcp"), fmt.Sprintf("MCP server %q is not declared in /mcpServers (%s)", server, list))
	}
	if !hasName {
		remote = t.Name
	}
	t.MCP = &MCPRef{Server: server, Name: remote}
	if _, ok := m["source"]; !ok {
		t.Source = SourceExternal
	}
}

// mcpToolNameProblem is toolNameProblem for an MCP-backed tool, whose key
// names it in Stead (models and MCP clients see it) but no export.
func mcpToolNameProblem(name string) string {
	msg := toolNameProblem(name)
	if msg == "" {
		return ""
	}
	msg = strings.Replace(msg, "because it names an exported function", "as every tool name is; the remote tool's own name goes in \"name\"", 1)
	msg = strings.Replace(msg, "so no exported function can have it", "which tool names cannot be; the remote tool's own name goes in \"name\"", 1)
	return msg
}

// Refuse returns a *ConfigError of problems found after Parse (by a deploy
// that checked the config against the servers it names), each located in
// the file as Parse's are.
func (c *Config) Refuse(problems ...Problem) error {
	if c.pos != nil {
		problems = c.pos.locate(problems)
	}
	return &ConfigError{Problems: problems}
}

// MCPToolPointer is the JSON pointer of tool name of agent an in the config.
func MCPToolPointer(an, name string) string { return jsonPointer("agents", an, "tools", name) }

// MCPHeaderPointer is the JSON pointer of a server's header in the config.
func MCPHeaderPointer(server, header string) string {
	return jsonPointer("mcpServers", server, "headersFromEnv", header)
}

// MCPServerPointer is the JSON pointer of a server's url in the config.
func MCPServerPointer(server string) string { return jsonPointer("mcpServers", server, "url") }

// AddWarnings appends warnings found after Parse (a deploy's pinned MCP
// tool definitions that changed), located in the file as Parse's are. It
// must be called before the Config is shared.
func (c *Config) AddWarnings(ws ...Problem) {
	if c.pos != nil {
		ws = c.pos.locate(ws)
	}
	c.Warnings = append(c.Warnings, ws...)
}
