package agent

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// stepKeys lists the keys of each step kind besides "id".
var stepKeys = map[StepKind][]string{
	ToolStep:  {"tool", "input"},
	ModelStep: {"model", "system", "prompt", "output"},
	AgentStep: {"agent"},
}

// kindKeys are the keys that say what a step is, in the order reported.
var kindKeys = []StepKind{ToolStep, ModelStep, AgentStep}

// stepKind tells a step's kind by its kind key and reports keys that belong
// to another kind. It returns "" when the kind cannot be told.
func (p *parser) stepKind(sm map[string]any, ptr string) StepKind {
	var kinds []StepKind
	for _, k := range kindKeys {
		if _, ok := sm[string(k)]; ok {
			kinds = append(kinds, k)
		}
	}
	switch len(kinds) {
	case 0:
		// Keys of exactly one kind (a tool step's "input") tell which kind
		// key is missing.
		var owners []StepKind
		for _, k := range kindKeys {
			for _, key := range stepKeys[k] {
				if _, ok := sm[key]; ok && !slices.Contains(owners, k) {
					owners = append(owners, k)
				}
			}
		}
		if len(owners) == 1 {
			p.report(child(ptr, string(owners[0])), "is required")
			return ""
		}
		p.report(ptr, `a step needs one of "tool" (call a tool), "model" (ask a model) or "agent" (let a model call tools)`)
		return ""
	case 1:
	default:
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = strconv.Quote(string(k))
		}
		p.report(ptr, fmt.Sprintf(`a step has exactly one of "tool", "model" or "agent"; this one has %s: split it into one step per kind`, strings.Join(names, " and ")))
		return ""
	}
	kind := kinds[0]
	for other, keys := range stepKeys {
		if other == kind {
			continue
		}
		for _, k := range keys {
			if _, ok := sm[k]; ok && !slices.Contains(stepKeys[kind], k) {
				p.report(child(ptr, k), fmt.Sprintf("%q belongs to %s steps; this is %s step (it has %q)%s", k, other, article(kind), kind, kindHint(kind, k)))
			}
		}
	}
	return kind
}

func article(k StepKind) string {
	if k == AgentStep {
		return "an agent"
	}
	return "a " + string(k)
}

func kindHint(kind StepKind, key string) string {
	switch {
	case kind == AgentStep && (key == "prompt" || key == "system"):
		return `; an agent step's prompt and instructions go inside "agent"`
	case kind == ModelStep && key == "input":
		return `; a model step's prompt is a template, as in "Summarize {{ $input.text }}"`
	}
	return ""
}

// modelStep reads a ModelStep's keys.
func (p *parser) modelStep(a *Agent, s *Step, sm map[string]any, ptr string, models modelRefs) {
	if name, ok := sm["model"].(string); ok && name != "" {
		s.Model = name
		if msg := models.missing(name); msg != "" {
			p.report(child(ptr, "model"), msg)
		}
	}
	s.System = p.template(a, s.Index, sm["system"], child(ptr, "system"))
	s.Prompt = p.template(a, s.Index, sm["prompt"], child(ptr, "prompt"))
	if _, ok := sm["prompt"]; !ok {
		p.report(child(ptr, "prompt"), `is required: it is what the step asks its model, as in "Summarize {{ $input.text }}"`)
	}
	switch out := sm["output"].(type) {
	case map[string]any:
		s.output = p.schema(child(ptr, "output"), out)
		s.OutputSchema = p.raw(child(ptr, "output"), out)
	case string, nil:
		// "text" (the schema refuses other strings) or absent.
	}
}

// toolNamePattern is what providers accept as a function name (OpenAI and
// Bedrock alike).
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// agentStep reads an AgentStep's "agent" object.
func (p *parser) agentStep(a *Agent, s *Step, sm map[string]any, ptr string, refs toolRefs, models modelRefs) {
	lm, ok := sm["agent"].(map[string]any)
	if !ok {
		return
	}
	ptr = child(ptr, "agent")
	l := &Loop{MaxTurns: DefaultMaxTurns, OnDecline: DeclineFail}
	if name, ok := lm["model"].(string); ok && name != "" {
		l.Model = name
		s.Model = name
		if msg := models.missing(name); msg != "" {
			p.report(child(ptr, "model"), msg)
		}
	}
	l.Instructions = p.template(a, s.Index, lm["instructions"], child(ptr, "instructions"))
	l.Prompt = p.template(a, s.Index, lm["prompt"], child(ptr, "prompt"))
	tools, _ := lm["tools"].([]any)
	for j, tv := range tools {
		tn, ok := tv.(string)
		if !ok || tn == "" {
			continue
		}
		tptr := child(child(ptr, "tools"), strconv.Itoa(j))
		if msg := refs.missing(tn); msg != "" {
			p.report(tptr, msg)
		} else if !toolNamePattern.MatchString(tn) {
			p.report(tptr, fmt.Sprintf("tool %q cannot be offered to a model: model providers accept tool names of letters, digits, \"_\" and \"-\" only (at most 64 characters)", tn))
		}
		if !slices.Contains(l.Tools, tn) {
			l.Tools = append(l.Tools, tn)
		}
	}
	if n, ok := integer(lm["maxTurns"], 100); ok && n > 0 {
		l.MaxTurns = int(n)
	}
	if d, ok := lm["onDecline"].(string); ok && d != "" {
		l.OnDecline = OnDecline(d)
	}
	s.Loop = l
}

// template compiles a prompt template found at ptr; nil when v is absent or
// not a string (the config schema has reported that).
func (p *parser) template(a *Agent, i int, v any, ptr string) *Template {
	str, ok := v.(string)
	if !ok {
		return nil
	}
	t, err := ParseTemplate(str)
	if err != nil {
		p.report(ptr, err.Error())
		return nil
	}
	if !p.exprCheck(a, i, ptr)("", t.Exprs()) {
		return nil
	}
	return t
}

// ValidateOutput checks a ModelStep's answer against its output schema. It
// returns nil for a text step. On failure the error is an *OutputError with
// Step set.
func (s *Step) ValidateOutput(agentName string, v any) error {
	if ps := valueProblems(s.output, v); ps != nil {
		return &OutputError{Agent: agentName, Step: s.ID, Problems: ps}
	}
	return nil
}
