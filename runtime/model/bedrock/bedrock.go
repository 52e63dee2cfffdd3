// Package bedrock is a model.Provider for AWS Bedrock's Converse API
// (POST /model/{modelId}/converse), over aws-sdk-go-v2's bedrockruntime
// client.
//
// The conversation maps onto Converse messages: the system prompt becomes
// "system", tool calls "toolUse" blocks, and tool results "toolResult" blocks
// in a user message (consecutive results are merged into one message, as
// Converse wants user and assistant turns to alternate). Tools are sent as
// "toolConfig.tools[].toolSpec" with their input schemas.
//
// A JSON answer (Request.OutputSchema) uses the tool-use trick, which every
// Bedrock model with tool use supports: the request offers one tool,
// "stead_output", whose input schema is the wanted schema, and forces it with
// toolChoice; the input of that call is the answer. A model that answers in
// text instead is not refused here: its text is returned as the content, and
// the caller validates it like any other answer.
//
// Usage comes from "usage.inputTokens" and "usage.outputTokens"; Bedrock
// reports no cost, so the configured prices apply.
//
// The SDK's own retries are off: model.Complete retries, with one policy for
// every provider. ThrottlingException, ServiceUnavailableException,
// InternalServerException, ModelNotReadyException, ModelTimeoutException and
// any 5xx answer are retryable; the rest (ValidationException,
// AccessDeniedException, …) are not, nor is an endpoint the egress policy
// of Options.HTTPClient refused (a *egress.RefusedError, the *model.Error's
// Err).
package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"stead/runtime/egress"
	"stead/runtime/model"
)

// OutputTool is the name of the tool that carries a JSON answer.
const OutputTool = "stead_output"

// Options configure a Client.
type Options struct {
	// ModelID is the Bedrock model or inference profile id, e.g.
	// "anthropic.claude-3-5-haiku-20241022-v1:0" or
	// "us.amazon.nova-lite-v1:0".
	ModelID string
	// Region is the AWS region, e.g. "us-east-1".
	Region string
	// BaseEndpoint, when set, replaces the regional endpoint (a VPC
	// endpoint, a proxy, or a test server).
	BaseEndpoint string
	// Credentials sign the requests; when nil, the SDK's default chain
	// (environment, shared config, container or instance role) is loaded.
	Credentials aws.CredentialsProvider
	// HTTPClient sends the requests; the SDK's default when nil.
	HTTPClient *http.Client
}

// Client is a model.Provider for one Bedrock model.
type Client struct {
	api     *bedrockruntime.Client
	modelID string
	name    string
}

var _ model.Provider = (*Client)(nil)

// New returns a client. Without Options.Credentials it loads the SDK's
// default configuration (which reads the environment and shared config
// files, but makes no request).
func New(ctx context.Context, o Options) (*Client, error) {
	if o.ModelID == "" || o.Region == "" {
		return nil, errors.New("bedrock: ModelID and Region are required")
	}
	var cfg aws.Config
	if o.Credentials != nil {
		cfg = aws.Config{Region: o.Region, Credentials: o.Credentials}
	} else {
		var err error
		cfg, err = config.LoadDefaultConfig(ctx, config.WithRegion(o.Region))
		if err != nil {
			return nil, fmt.Errorf("bedrock: load AWS config: %w", err)
		}
	}
	api := bedrockruntime.NewFromConfig(cfg, func(bo *bedrockruntime.Options) {
		bo.Region = o.Region
		bo.RetryMaxAttempts = 1
		bo.Retryer = aws.NopRetryer{}
		if o.BaseEndpoint != "" {
			bo.BaseEndpoint = aws.String(o.BaseEndpoint)
		}
		if o.HTTPClient != nil {
			bo.HTTPClient = o.HTTPClient
		}
	})
	return &Client{api: api, modelID: o.ModelID, name: "bedrock " + o.ModelID}, nil
}

// Complete sends one Converse request.
func (c *Client) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	in, err := c.input(req)
	if err != nil {
		return model.Response{}, err
	}
	out, err := c.api.Converse(ctx, in)
	if err != nil {
		if ctx.Err() != nil {
			return model.Response{}, ctx.Err()
		}
		return model.Response{}, c.translate(err)
	}
	return c.response(req, out)
}

func (c *Client) input(req model.Request) (*bedrockruntime.ConverseInput, error) {
	in := &bedrockruntime.ConverseInput{ModelId: aws.String(c.modelID)}
	if req.System != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	if req.MaxTokens > 0 || req.Temperature != nil {
		in.InferenceConfig = &types.InferenceConfiguration{}
		if req.MaxTokens > 0 {
			in.InferenceConfig.MaxTokens = aws.Int32(int32(min(req.MaxTokens, 1<<31-1)))
		}
		if req.Temperature != nil {
			in.InferenceConfig.Temperature = aws.Float32(float32(*req.Temperature))
		}
	}
	for _, m := range req.Messages {
		var role types.ConversationRole
		var blocks []types.ContentBlock
		switch m.Role {
		case model.User:
			role = types.ConversationRoleUser
			blocks = append(blocks, &types.ContentBlockMemberText{Value: nonEmpty(m.Content)})
		case model.Assistant:
			role = types.ConversationRoleAssistant
			if m.Content != "" || len(m.ToolCalls) == 0 {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: nonEmpty(m.Content)})
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String(tc.ID), Name: aws.String(tc.Name), Input: document.NewLazyDocument(arguments(tc.Arguments)),
				}})
			}
		case model.ToolRole:
			role = types.ConversationRoleUser
			status := types.ToolResultStatusSuccess
			if m.IsError {
				status = types.ToolResultStatusError
			}
			blocks = append(blocks, &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
				ToolUseId: aws.String(m.ToolCallID),
				Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: nonEmpty(m.Content)}},
				Status:    status,
			}})
		default:
			return nil, fmt.Errorf("%s: message role %q is not user, assistant or tool", c.name, m.Role)
		}
		// Converse wants user and assistant turns to alternate: tool results
		// (and a user message after them) join the previous user message.
		if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == role {
			in.Messages[n-1].Content = append(in.Messages[n-1].Content, blocks...)
			continue
		}
		in.Messages = append(in.Messages, types.Message{Role: role, Content: blocks})
	}
	tc := &types.ToolConfiguration{}
	for _, t := range req.Tools {
		tc.Tools = append(tc.Tools, toolSpec(t.Name, t.Description, t.InputSchema))
	}
	if len(req.OutputSchema) > 0 {
		tc.Tools = append(tc.Tools, toolSpec(OutputTool, "Give your answer by calling this tool: its input is your answer.", req.OutputSchema))
		tc.ToolChoice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(OutputTool)}}
	}
	if len(tc.Tools) > 0 {
		in.ToolConfig = tc
	}
	return in, nil
}

func toolSpec(name, description string, schema json.RawMessage) types.Tool {
	var s any = map[string]any{"type": "object"}
	if len(schema) > 0 {
		if v, err := decodeJSON(schema); err == nil {
			s = v
		}
	}
	spec := types.ToolSpecification{Name: aws.String(name), InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(s)}}
	if description != "" {
		spec.Description = aws.String(description)
	}
	return &types.ToolMemberToolSpec{Value: spec}
}

// arguments decodes a tool call's JSON text for re-sending; Converse carries
// tool inputs as JSON objects, so text that is not one is sent as {}.
func arguments(s string) any {
	v, err := decodeJSON([]byte(s))
	if m, ok := v.(map[string]any); ok && err == nil {
		return m
	}
	return map[string]any{}
}

func decodeJSON(b []byte) (any, error) {
	var v any
	err := json.Unmarshal(b, &v)
	return v, err
}

// nonEmpty keeps a text block valid: Converse refuses empty text.
func nonEmpty(s string) string {
	if s == "" {
		return " "
	}
	return s
}

func (c *Client) response(req model.Request, out *bedrockruntime.ConverseOutput) (model.Response, error) {
	resp := model.Response{StopReason: string(out.StopReason)}
	if out.Usage != nil {
		resp.Usage.InputTokens = int64(aws.ToInt32(out.Usage.InputTokens))
		resp.Usage.OutputTokens = int64(aws.ToInt32(out.Usage.OutputTokens))
	}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return model.Response{}, &model.Error{Provider: c.name, Message: fmt.Sprintf("the answer holds no message (%T)", out.Output)}
	}
	var text []string
	for _, b := range msg.Value.Content {
		switch b := b.(type) {
		case *types.ContentBlockMemberText:
			text = append(text, b.Value)
		case *types.ContentBlockMemberToolUse:
			args := "{}"
			if b.Value.Input != nil {
				raw, err := b.Value.Input.MarshalSmithyDocument()
				if err != nil {
					return model.Response{}, &model.Error{Provider: c.name, Message: "tool input is not a JSON document: " + err.Error()}
				}
				args = string(raw)
			}
			name := aws.ToString(b.Value.Name)
			if len(req.OutputSchema) > 0 && name == OutputTool {
				resp.Content = args
				continue
			}
			resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: aws.ToString(b.Value.ToolUseId), Name: name, Arguments: args})
		}
	}
	if resp.Content == "" {
		resp.Content = strings.Join(text, "")
	}
	return resp, nil
}

// retryable are the Bedrock error codes worth retrying.
var retryable = map[string]bool{
	"ThrottlingException":         true,
	"ServiceUnavailableException": true,
	"InternalServerException":     true,
	"ModelNotReadyException":      true,
	"ModelTimeoutException":       true,
}

// translate turns an SDK error into a *model.Error, once, here.
func (c *Client) translate(err error) error {
	e := &model.Error{Provider: c.name, Message: err.Error()}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		e.Status = re.HTTPStatusCode()
		if re.Response != nil {
			e.RetryAfter = retryAfter(re.Response.Header.Get("Retry-After"))
		}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		e.Code = ae.ErrorCode()
		e.Message = ae.ErrorMessage()
	}
	switch {
	case e.Code != "":
		e.Retryable = retryable[e.Code] || e.Status == 429 || e.Status >= 500
	case e.Status != 0:
		e.Retryable = e.Status == 408 || e.Status == 429 || e.Status >= 500
	default:
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			// The egress policy refused the endpoint: it will again.
			e.Message, e.Err = refused.Error(), refused
			return e
		}
		// No answer at all: a broken connection.
		e.Retryable = true
	}
	return e
}

func retryAfter(h string) time.Duration {
	if n, err := strconv.ParseFloat(strings.TrimSpace(h), 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	return 0
}
