package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/store"
)

// CheckEdit checks an edited input of a pending approval's call the way
// Decide does (the tool's input schema in the run's deployment, and the
// deny rules of its policy) without deciding anything: the console checks
// an edit as it is typed. It returns an *EditError for an input the
// approve would refuse, ErrForbidden for an actor who may not decide, and
// store.ErrNotFound for an approval of another project.
func (e *Engine) CheckEdit(ctx context.Context, actor approvals.Actor, approvalID string, input json.RawMessage) error {
	a, err := e.store.GetApproval(ctx, approvalID)
	if err != nil || a.ProjectID != actor.ProjectID {
		if err == nil {
			err = store.ErrNotFound
		}
		return fmt.Errorf("approval %s: %w", approvalID, err)
	}
	if !actor.May(approvals.Decide, a.ProjectID) {
		return ErrForbidden
	}
	return e.validateEdit(ctx, a, input)
}

// Presentation is what a run's deployment says about how customers see
// it: the project's branding (nil when stead.json has none) and the tools'
// customer-facing labels by tool name (only tools that have one).
type Presentation struct {
	Branding *agent.Branding
	Labels   map[string]string
}

// Presentation returns the presentation of run r, which the caller has
// already been allowed to read (GetRun with the same actor).
func (e *Engine) Presentation(ctx context.Context, r store.Run) (Presentation, error) {
	cfg, err := e.deployments.config(ctx, r.ProjectID, r.Deployment)
	if err != nil {
		return Presentation{}, fmt.Errorf("presentation of run %s: %w", r.ID, err)
	}
	p := Presentation{Branding: cfg.Branding, Labels: map[string]string{}}
	if ag, ok := cfg.Agent(r.Agent); ok {
		for name, t := range ag.Tools {
			if t.Label != "" {
				p.Labels[name] = t.Label
			}
		}
	}
	return p, nil
}
