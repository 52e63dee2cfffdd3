// Package eventschema checks a run's trace events against the event kinds
// of Stead's OpenAPI document (api/openapi.json): components.schemas.Event
// is a oneOf with one schema per event type, chosen by its discriminator,
// and StreamMessage is one message of the SSE stream.
//
// The api tests check every SSE message with it (each event page is
// already checked as a response); the engine's tests check the data of
// every event the engine writes, and fail when a documented kind was
// written by none of them. It takes the document's bytes rather than
// importing package api, so that packages below api can read the file.
package eventschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schemas are the document's event schemas, compiled.
type Schemas struct {
	message *jsonschema.Schema
	event   map[string]*jsonschema.Schema // by type: the whole event
	data    map[string]*jsonschema.Schema // by type: its data
}

const loc = "urn:stead:openapi.json"

// Load compiles the event schemas of an OpenAPI document.
func Load(doc []byte) (*Schemas, error) {
	var d struct {
		Components struct {
			Schemas struct {
				Event struct {
					Discriminator struct {
						PropertyName string            `json:"propertyName"`
						Mapping      map[string]string `json:"mapping"`
					} `json:"discriminator"`
				} `json:"Event"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	disc := d.Components.Schemas.Event.Discriminator
	if disc.PropertyName != "type" || len(disc.Mapping) == 0 {
		return nil, fmt.Errorf("the OpenAPI document's Event has no discriminator on type")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(loc, v); err != nil {
		return nil, err
	}
	s := &Schemas{event: map[string]*jsonschema.Schema{}, data: map[string]*jsonschema.Schema{}}
	if s.message, err = c.Compile(loc + "#/components/schemas/StreamMessage"); err != nil {
		return nil, fmt.Errorf("compile StreamMessage: %w", err)
	}
	for typ, ref := range disc.Mapping {
		if !strings.HasPrefix(ref, "#/components/schemas/") {
			return nil, fmt.Errorf("event type %s maps to %q, not a component schema", typ, ref)
		}
		if s.event[typ], err = c.Compile(loc + ref); err != nil {
			return nil, fmt.Errorf("compile the schema of %s: %w", typ, err)
		}
		if s.data[typ], err = c.Compile(loc + ref + "/properties/data"); err != nil {
			return nil, fmt.Errorf("compile the data schema of %s: %w", typ, err)
		}
	}
	return s, nil
}

// Kinds are the documented event types, sorted.
func (s *Schemas) Kinds() []string {
	out := make([]string, 0, len(s.data))
	for k := range s.data {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// CheckData checks the data of an event of type typ (a store event's, as
// the engine writes it; no data is {}).
func (s *Schemas) CheckData(typ string, data []byte) error {
	sch, ok := s.data[typ]
	if !ok {
		return fmt.Errorf("event type %q is not one of the OpenAPI document's Event kinds", typ)
	}
	if len(data) == 0 {
		data = []byte("{}")
	}
	return validate(sch, data, typ+" data")
}

// CheckEvent checks an event as the API sends it: the schema of its type.
func (s *Schemas) CheckEvent(event []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(event, &head); err != nil {
		return fmt.Errorf("event %s: %w", event, err)
	}
	sch, ok := s.event[head.Type]
	if !ok {
		return fmt.Errorf("event type %q is not one of the OpenAPI document's Event kinds", head.Type)
	}
	return validate(sch, event, head.Type+" event")
}

// CheckMessage checks one SSE message: its data an Event (checked by its
// type's schema, for a precise error), its id the event's seq and its
// event field the event's type, and the whole against StreamMessage.
func (s *Schemas) CheckMessage(id, event string, data []byte) error {
	if err := s.CheckEvent(data); err != nil {
		return err
	}
	var head struct {
		Seq  int64  `json:"seq"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return err
	}
	if id != strconv.FormatInt(head.Seq, 10) {
		return fmt.Errorf("message id %q is not its event's seq %d", id, head.Seq)
	}
	if event != head.Type {
		return fmt.Errorf("message event %q is not its event's type %q", event, head.Type)
	}
	msg, err := json.Marshal(map[string]any{"id": id, "event": event, "data": json.RawMessage(data)})
	if err != nil {
		return err
	}
	return validate(s.message, msg, "stream message")
}

func validate(sch *jsonschema.Schema, doc []byte, what string) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("%s is not JSON: %w", what, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s %s does not match the OpenAPI document: %w", what, doc, err)
	}
	return nil
}
