package notifytest

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"stead/api"
)

// payloadSchema is the HTTP API document's WebhookPayload (api/openapi.json,
// components/schemas, which its "webhooks" name for every event type).
var payloadSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.OpenAPI))
	if err != nil {
		return nil, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "stead:///openapi.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url + "#/components/schemas/WebhookPayload")
})

// CheckPayload reports whether body is a webhook payload as the API's
// OpenAPI document describes it (versioned, the event types it lists,
// no field it lacks).
func CheckPayload(body []byte) error {
	s, err := payloadSchema()
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the payload is not JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("the payload is not the OpenAPI document's WebhookPayload: %w", err)
	}
	return nil
}
