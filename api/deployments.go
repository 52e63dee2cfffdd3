package api

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"

	"stead/api/wire"
	"stead/runtime/engine"
	"stead/strictjson"
)

// deployRequest is the body of POST /v1/deployments.
//
// The bundle travels as a JSON string (its source text) rather than as a
// multipart upload, so that every route takes the same JSON body with the
// same checks (unknown fields, size, content type). The config is the
// stead.json object, or its text as a JSON string: sent as text, the line
// and column of each problem point into the file the developer edits.
type deployRequest struct {
	Bundle *string         `json:"bundle"`
	Config json.RawMessage `json:"config"`
}

// createDeployment: POST /v1/deployments {bundle, config} → 201 with the new
// version. A refused bundle or config stores nothing: 400 with details
// listing each problem (config: JSON pointer, message, line, column;
// bundle: code, file, line, column, message).
func (s *Server) createDeployment(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req deployRequest
	// A JSON string can take up to twice its text's bytes for escapes
	// (\n, \"), so the body may be that much larger than the bundle limit;
	// the bundle itself is held to the limit below.
	if err := readBody(r, 2*s.cfg.MaxBundle+s.cfg.MaxBody, &req); err != nil {
		return err
	}
	var problems []wire.FieldProblem
	switch {
	case req.Bundle == nil || *req.Bundle == "":
		problems = append(problems, wire.FieldProblem{Field: "bundle", Message: "is required: the ESM bundle's source text, as a string"})
	case int64(len(*req.Bundle)) > s.cfg.MaxBundle:
		return tooLarge("bundle is %s; the limit is %s", size(int64(len(*req.Bundle))), size(s.cfg.MaxBundle))
	}
	var config []byte
	switch {
	case isNull(req.Config):
		problems = append(problems, wire.FieldProblem{Field: "config", Message: "is required: the stead.json object (or its text as a string)"})
	case req.Config[0] == '"':
		var text string
		if err := strictjson.Unmarshal(req.Config, &text); err != nil {
			problems = append(problems, wire.FieldProblem{Field: "config", Message: "is not a valid JSON string"})
		}
		config = []byte(text)
	case req.Config[0] == '{':
		config = req.Config
	default:
		problems = append(problems, wire.FieldProblem{Field: "config", Message: "must be the stead.json object (or its text as a string)"})
	}
	if int64(len(config)) > s.cfg.MaxBody {
		return tooLarge("config is %s; the limit is %s", size(int64(len(config))), size(s.cfg.MaxBody))
	}
	if len(problems) > 0 {
		return invalid(problems...)
	}
	d, err := s.engine.Deploy(r.Context(), c.actor, engine.DeployParams{Bundle: []byte(*req.Bundle), Config: config})
	if err != nil {
		return err
	}
	out := deploymentOf(d)
	if cfg, err := s.engine.DeploymentConfig(r.Context(), c.actor, d.Version); err == nil {
		out.Warnings = configProblems(cfg.Warnings)
	}
	w.Header().Set("Location", "/v1/deployments")
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// listDeployments: GET /v1/deployments?cursor=&limit= → newest first.
func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := newQuery(r)
	limit := q.limit()
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.engine.Deployments(r.Context(), c.actor, q.str("cursor"), limit)
	if err != nil {
		return err
	}
	out := wire.DeploymentList{Deployments: make([]wire.Deployment, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, d := range page.Items {
		out.Deployments = append(out.Deployments, deploymentOf(d))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listAgents: GET /v1/agents → the agents of the latest deployment with
// their tools' posture, policy and steps.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, c *caller) error {
	d, cfg, err := s.engine.Agents(r.Context(), c.actor)
	if errors.Is(err, engine.ErrNoDeployment) {
		writeJSON(w, http.StatusOK, wire.AgentList{Agents: []wire.Agent{}, Models: []wire.Model{}})
		return nil
	}
	if err != nil {
		return err
	}
	out := wire.AgentList{Deployment: d.Version, Agents: []wire.Agent{}, Models: []wire.Model{}}
	for _, name := range cfg.AgentNames() {
		a, _ := cfg.Agent(name)
		out.Agents = append(out.Agents, agentOf(a))
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Models)) {
		out.Models = append(out.Models, modelOf(cfg.Models[name]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
