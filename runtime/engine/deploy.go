package engine

import (
	"context"
	"errors"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/runtime/bundle"
	"stead/store"
)

// BundleName is the file name every deployed bundle has in stacks.
const BundleName = "handlers.mjs"

// DeployParams is a new deployment: an ESM bundle and the stead.json text.
type DeployParams struct {
	Bundle []byte
	Config []byte
}

// Deploy validates a bundle and config together and stores them as the
// project's next version. It pins the definitions of the config's
// MCP-backed tools (store.Deployment.MCPTools, each marked with how it
// differs from the previous deployment's). Errors: *agent.ConfigError (every
// problem with its JSON pointer, including tools the bundle does not
// export, groups the project does not have, a headersFromEnv variable that
// is not set, an MCP server that cannot be listed and a remote tool it does
// not list), *bundle.Error
// (file:line), ErrForbidden. A refused deployment stores nothing.
func (e *Engine) Deploy(ctx context.Context, actor approvals.Actor, p DeployParams) (store.Deployment, error) {
	if !actor.Role.May(approvals.Deploy) {
		return store.Deployment{}, ErrForbidden
	}
	cfg, err := agent.Parse(p.Config)
	if err != nil {
		return store.Deployment{}, err
	}
	b, err := e.compiler.Load(ctx, BundleName, p.Bundle)
	if err != nil {
		return store.Deployment{}, err
	}
	if err := cfg.CheckExports(b.Functions()); err != nil {
		return store.Deployment{}, err
	}
	if err := cfg.CheckGroups(func(name string) (bool, error) {
		_, err := e.store.GetGroup(ctx, actor.ProjectID, name)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return store.Deployment{}, err
	}
	var prevPins []store.MCPToolPin
	if len(cfg.MCPTools()) > 0 {
		prev, err := e.store.LatestDeployment(ctx, actor.ProjectID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.Deployment{}, fmt.Errorf("latest deployment: %w", err)
		}
		prevPins = prev.MCPTools
	}
	pins, err := e.pinMCP(ctx, cfg, prevPins)
	if err != nil {
		return store.Deployment{}, err
	}
	if err := e.cfg.Blobs.Put(ctx, b.Digest, p.Bundle); err != nil {
		return store.Deployment{}, fmt.Errorf("store bundle: %w", err)
	}
	d, err := e.store.CreateDeployment(ctx, store.Deployment{
		ProjectID:  actor.ProjectID,
		Digest:     b.Digest,
		BundleSize: int64(len(p.Bundle)),
		Config:     cfg.Raw,
		Agents:     cfg.AgentNames(),
		MCPTools:   pins,
		CreatedBy:  actor.ID,
		CreatedAt:  e.now(),
	})
	if err != nil {
		return store.Deployment{}, fmt.Errorf("create deployment: %w", err)
	}
	return d, nil
}

// deployment is a deployment ready to run: its parsed config and bundle.
type deployment struct {
	store.Deployment
	config *agent.Config
	bundle *bundle.Bundle
	// models holds the deployment's opened model providers.
	models *modelCache
}

type deploymentKey struct {
	project string
	version int
}

// deploymentCache keeps parsed configs per deployment; bundles are cached by
// the compiler.
type deploymentCache struct {
	e       *Engine
	configs *lru.Cache[deploymentKey, *deployment]
}

func newDeploymentCache(e *Engine) *deploymentCache {
	c, _ := lru.New[deploymentKey, *deployment](256)
	return &deploymentCache{e: e, configs: c}
}

// get returns a deployment with its bundle compiled.
func (c *deploymentCache) get(ctx context.Context, projectID string, version int) (*deployment, error) {
	d, err := c.parsed(ctx, projectID, version)
	if err != nil {
		return nil, err
	}
	if b, ok := c.e.compiler.Get(d.Digest); ok {
		return &deployment{Deployment: d.Deployment, config: d.config, bundle: b, models: d.models}, nil
	}
	src, err := c.e.cfg.Blobs.Get(ctx, d.Digest)
	if err != nil {
		return nil, fmt.Errorf("get bundle %s: %w", d.Digest, err)
	}
	b, err := c.e.compiler.Load(ctx, BundleName, src)
	if err != nil {
		return nil, fmt.Errorf("compile bundle %s: %w", d.Digest, err)
	}
	if b.Digest != d.Digest {
		return nil, fmt.Errorf("bundle %s: stored bytes have digest %s", d.Digest, b.Digest)
	}
	return &deployment{Deployment: d.Deployment, config: d.config, bundle: b, models: d.models}, nil
}

// parsed returns a deployment with its parsed config (cached), without its
// bundle.
func (c *deploymentCache) parsed(ctx context.Context, projectID string, version int) (*deployment, error) {
	k := deploymentKey{projectID, version}
	if d, ok := c.configs.Get(k); ok {
		return d, nil
	}
	rec, err := c.e.store.GetDeployment(ctx, projectID, version)
	if err != nil {
		return nil, fmt.Errorf("get deployment %d: %w", version, err)
	}
	cfg, err := agent.Parse(rec.Config)
	if err != nil {
		return nil, fmt.Errorf("parse config of deployment %d: %w", version, err)
	}
	if err := adoptPins(cfg, rec.MCPTools); err != nil {
		return nil, fmt.Errorf("pinned MCP tool schemas of deployment %d: %w", version, err)
	}
	cfg.AddWarnings(pinChanges(cfg, rec.MCPTools)...)
	d := &deployment{Deployment: rec, config: cfg, models: &modelCache{}}
	c.configs.Add(k, d)
	return d, nil
}

// config returns a deployment's parsed config without loading its bundle:
// deciding and expiring approvals never need the bundle (the sweeper on AWS
// cannot even read it).
func (c *deploymentCache) config(ctx context.Context, projectID string, version int) (*agent.Config, error) {
	d, err := c.parsed(ctx, projectID, version)
	if err != nil {
		return nil, err
	}
	return d.config, nil
}

// latest returns the project's newest deployment.
func (c *deploymentCache) latest(ctx context.Context, projectID string) (*deployment, error) {
	rec, err := c.e.store.LatestDeployment(ctx, projectID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoDeployment
	}
	if err != nil {
		return nil, fmt.Errorf("latest deployment: %w", err)
	}
	return c.get(ctx, projectID, rec.Version)
}

// Deployments lists the project's deployments, newest first.
func (e *Engine) Deployments(ctx context.Context, actor approvals.Actor, cursor string, limit int) (store.Page[store.Deployment], error) {
	if !actor.Role.May(approvals.ReadDeployments) {
		return store.Page[store.Deployment]{}, ErrForbidden
	}
	return e.store.ListDeployments(ctx, actor.ProjectID, cursor, limit)
}

// Agents returns the agents of the latest deployment with their parsed
// configuration.
func (e *Engine) Agents(ctx context.Context, actor approvals.Actor) (store.Deployment, *agent.Config, error) {
	if !actor.Role.May(approvals.ReadDeployments) {
		return store.Deployment{}, nil, ErrForbidden
	}
	d, err := e.deployments.latest(ctx, actor.ProjectID)
	if err != nil {
		return store.Deployment{}, nil, err
	}
	return d.Deployment, d.config, nil
}

// DeploymentConfig returns the parsed config of one deployment.
func (e *Engine) DeploymentConfig(ctx context.Context, actor approvals.Actor, version int) (*agent.Config, error) {
	if !actor.Role.May(approvals.ReadDeployments) {
		return nil, ErrForbidden
	}
	return e.deployments.config(ctx, actor.ProjectID, version)
}
