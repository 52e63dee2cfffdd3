package rie

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Gateway serves HTTP on a free loopback port the way API Gateway's HTTP
// API does in front of a function (payload format 2.0, stage $default):
// each request becomes one event, invoked on the instance, and its
// response is written back. It is for clients that speak HTTP, not Lambda
// events — an MCP client against the API function. API Gateway itself
// cannot run here; this follows its documented payload format (the one
// functions/apigw reads): rawPath, rawQueryString, headers lower-cased and
// joined with commas, cookies apart, the body base64 when not UTF-8 text.
// Invocations are one at a time, as the emulator needs. It returns the
// base URL and stops with the test.
func (i *Instance) Gateway(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := gatewayEvent(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		payload, _ := json.Marshal(ev)
		out, err := i.Invoke(r.Context(), payload)
		if err != nil {
			// API Gateway answers 500 when the integration fails.
			http.Error(w, `{"message":"Internal Server Error"}`, http.StatusInternalServerError)
			return
		}
		var res events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &res); err != nil {
			http.Error(w, `{"message":"Internal Server Error"}`, http.StatusInternalServerError)
			return
		}
		for k, v := range res.Headers {
			w.Header().Set(k, v)
		}
		for k, vs := range res.MultiValueHeaders {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		for _, c := range res.Cookies {
			w.Header().Add("Set-Cookie", c)
		}
		body := []byte(res.Body)
		if res.IsBase64Encoded {
			if body, err = base64.StdEncoding.DecodeString(res.Body); err != nil {
				http.Error(w, `{"message":"Internal Server Error"}`, http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(body) // a client gone mid-response is the client's loss
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func gatewayEvent(r *http.Request) (events.APIGatewayV2HTTPRequest, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	headers := map[string]string{}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.String())
	}
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	now := time.Now()
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "$default",
		RawPath:        r.URL.Path,
		RawQueryString: r.URL.RawQuery,
		Cookies:        cookies,
		Headers:        headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: r.Host,
			Stage:      "$default",
			RequestID:  "gw-" + now.Format("150405.000000000"),
			TimeEpoch:  now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: ip, UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if isText(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev, nil
}

// isText: API Gateway passes UTF-8 text bodies as they are.
func isText(b []byte) bool {
	return strings.ToValidUTF8(string(b), "\uFFFD") == string(b)
}
