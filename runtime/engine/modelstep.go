package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"stead/runtime/agent"
	"stead/runtime/model"
)

// modelStep asks the step's model once. The answer is the step's output: a
// string, or, with an output schema, the JSON value it holds, validated
// against the schema. A model step has no side effects, so one interrupted
// by a crash is simply asked again.
func (x *execution) modelStep(ctx context.Context, s *agent.Step) (stepOutput, error) {
	m, ok := x.dep.config.Model(s.Model)
	if !ok {
		return stepOutput{}, x.fail(ctx, s.ID, CodeModelConfig, fmt.Sprintf("step %s: model %q is not declared", s.ID, s.Model))
	}
	sc := x.scope()
	var system string
	if s.System != nil {
		var err error
		if system, err = s.System.Resolve(sc); err != nil {
			return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidInput, fmt.Sprintf("step %s: system: %v", s.ID, err))
		}
	}
	prompt, err := s.Prompt.Resolve(sc)
	if err != nil {
		return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidInput, fmt.Sprintf("step %s: prompt: %v", s.ID, err))
	}
	outKind := "text"
	if s.OutputSchema != nil {
		outKind = "json"
	}
	x.emit("step.started", s.ID, map[string]any{
		"kind": "model", "model": m.Name, "system": system, "prompt": prompt, "output": outKind, "attempt": x.run.Attempts,
	})
	req := model.Request{System: system, Messages: []model.Message{{Role: model.User, Content: prompt}}}
	if s.OutputSchema != nil {
		req.OutputSchema, req.OutputName = s.OutputSchema, s.ID
	}
	mc, err := x.ask(ctx, s, m, req, 0)
	if err != nil {
		return stepOutput{}, err
	}
	answer := mc.resp.Content
	if strings.TrimSpace(answer) == "" {
		return stepOutput{}, x.fail(ctx, s.ID, CodeEmptyResponse, fmt.Sprintf(
			"step %s: model %q answered with no text (stop reason %q)", s.ID, m.Name, mc.resp.StopReason))
	}
	var value any = answer
	if s.OutputSchema != nil {
		v, err := decode(json.RawMessage(stripFences(answer)))
		if err != nil {
			return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidOutput, fmt.Sprintf(
				"step %s: model %q did not answer with JSON (%v); the answer starts %q", s.ID, m.Name, err, head(answer, 200)))
		}
		if err := s.ValidateOutput(x.agent.Name, v); err != nil {
			return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidOutput, err.Error())
		}
		value = v
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidOutput, fmt.Sprintf("step %s: %v", s.ID, err))
	}
	if len(raw) > x.e.cfg.MaxOutputInline {
		return stepOutput{}, x.fail(ctx, s.ID, CodeInvalidOutput, fmt.Sprintf(
			"step %s: the answer has %d bytes, more than the %d a step output may have; set maxTokens on the model", s.ID, len(raw), x.e.cfg.MaxOutputInline))
	}
	x.emit("step.completed", s.ID, map[string]any{
		"kind": "model", "model": m.Name, "output": json.RawMessage(raw), "costs": mc.costs, "usage": usageData(mc.resp.Usage),
		"stopReason": mc.resp.StopReason, "attempts": mc.attempts, "durationMs": mc.took.Milliseconds(),
	})
	return stepOutput{output: raw, value: value, costs: mc.costs, key: IdempotencyKey(x.run.ProjectID, x.run.ID, s.Index, s.ID)}, nil
}

// head returns at most n bytes of s, cut at a character boundary.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
