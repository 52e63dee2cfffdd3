package awsstack

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// NewLogger returns the functions' logger: one JSON object per line on w
// (stdout in a main), which Lambda's JSON log format keeps as it is and
// filters by its "level". Records carry the function and, inside an
// invocation, its requestId. The level is AWS_LAMBDA_LOG_LEVEL (TRACE and
// DEBUG → debug, WARN, ERROR and FATAL → error), INFO when unset.
func NewLogger(w io.Writer, fn Function, level string) *slog.Logger {
	var lv slog.Level
	switch strings.ToUpper(strings.TrimSpace(level)) {
	case "TRACE", "DEBUG":
		lv = slog.LevelDebug
	case "WARN":
		lv = slog.LevelWarn
	case "ERROR", "FATAL":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})
	return slog.New(requestIDHandler{h}).With("function", string(fn))
}

// requestIDHandler adds the invocation's request id to records logged with
// its context.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// Broken is the handler of a function that could not start (its
// configuration is wrong): every invocation fails with err, so the reason
// shows in the invocation's answer as well as in the log.
func Broken(log *slog.Logger, err error) lambda.Handler {
	log.Error("the function cannot start", "error", err)
	return broken{err}
}

type broken struct{ err error }

func (b broken) Invoke(context.Context, []byte) ([]byte, error) { return nil, b.err }

// RouteStdLog makes log the default logger and sends the standard log
// package's lines — aws-lambda-go writes a failed invocation's error there
// — through it at WARN, so that every line a function prints is JSON.
func RouteStdLog(log *slog.Logger) {
	slog.SetDefault(log)
	slog.SetLogLoggerLevel(slog.LevelWarn)
}
