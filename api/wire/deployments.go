package wire

import (
	"encoding/json"
	"time"
)

// Deployment is a deployed version.
type Deployment struct {
	Version    int       `json:"version"`
	Digest     string    `json:"digest"`
	BundleSize int64     `json:"bundleSize"`
	Agents     []string  `json:"agents"`
	CreatedBy  string    `json:"createdBy"`
	CreatedAt  time.Time `json:"createdAt"`
	// MCPTools are the definitions of the deployment's MCP-backed tools as
	// deploy pinned them, each with what changed since the previous
	// deployment ("new", "description, inputSchema"; none when unchanged).
	MCPTools []MCPToolPin `json:"mcpTools,omitempty"`
	// Warnings are things the config allows but probably does not mean;
	// only in the response to a deploy.
	Warnings []ConfigProblem `json:"warnings,omitempty"`
}

// Agent describes an agent of the latest deployment: its tools' posture
// and its steps.
type Agent struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	// ApprovalTimeout is the agent's approval timeout, e.g. "15m0s".
	ApprovalTimeout string       `json:"approvalTimeout"`
	Tools           []Tool       `json:"tools"`
	Steps           []Step       `json:"steps"`
	Policy          []PolicyRule `json:"policy,omitempty"`
}

// Tool is a tool's posture.
type Tool struct {
	Name             string `json:"name"`
	Description      string `json:"description,omitempty"`
	Effect           string `json:"effect"`
	Source           string `json:"source"`
	RequiresApproval bool   `json:"requiresApproval"`
	TimeoutMs        int64  `json:"timeoutMs"`
	// ApprovalTimeout is how long an approval of a call stays pending.
	ApprovalTimeout string          `json:"approvalTimeout"`
	Input           json.RawMessage `json:"input,omitempty"`
	Output          json.RawMessage `json:"output,omitempty"`
}

// Step is one step of an agent, its input as written (expressions
// unresolved).
type Step struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Tool and Input: a tool step's.
	Tool  string `json:"tool,omitempty"`
	Input any    `json:"input,omitempty"`
	// Model, System, Prompt and Output: a model step's (Output is its JSON
	// Schema, absent for a text answer).
	Model  string          `json:"model,omitempty"`
	System string          `json:"system,omitempty"`
	Prompt string          `json:"prompt,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	// Agent: an agent step's settings.
	Agent *LoopSettings `json:"agent,omitempty"`
}

// LoopSettings are an agent step's settings.
type LoopSettings struct {
	Model        string   `json:"model"`
	Instructions string   `json:"instructions,omitempty"`
	Prompt       string   `json:"prompt,omitempty"`
	Tools        []string `json:"tools"`
	MaxTurns     int      `json:"maxTurns"`
	OnDecline    string   `json:"onDecline"`
}

// Model is a configured language model. Its API key never leaves the
// server: only the name of the environment variable that holds it.
type Model struct {
	Name      string      `json:"name"`
	Provider  string      `json:"provider"`
	BaseURL   string      `json:"baseUrl,omitempty"`
	Model     string      `json:"model,omitempty"`
	ModelID   string      `json:"modelId,omitempty"`
	Region    string      `json:"region,omitempty"`
	APIKeyEnv string      `json:"apiKeyEnv,omitempty"`
	Prices    *ModelPrice `json:"prices,omitempty"`
	TimeoutMs int64       `json:"timeoutMs"`
}

// ModelPrice is USD per million tokens.
type ModelPrice struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// PolicyRule is one rule of an agent's policy.
type PolicyRule struct {
	Tool     string          `json:"tool"`
	Decision string          `json:"decision"`
	Reason   string          `json:"reason,omitempty"`
	When     json.RawMessage `json:"when,omitempty"`
}

// DeploymentList is a page of deployments, newest first.
type DeploymentList struct {
	Deployments []Deployment `json:"deployments"`
	NextCursor  string       `json:"nextCursor,omitempty"`
}

// AgentList is the agents of the latest deployment (Deployment 0 and no
// agents when nothing is deployed).
type AgentList struct {
	Deployment int     `json:"deployment"`
	Agents     []Agent `json:"agents"`
	Models     []Model `json:"models"`
}

// MCPToolPin is a remote tool's definition as a deploy pinned it.
type MCPToolPin struct {
	Server      string `json:"server"`
	Tool        string `json:"tool"`
	Fingerprint string `json:"fingerprint"`
	Change      string `json:"change,omitempty"`
}
