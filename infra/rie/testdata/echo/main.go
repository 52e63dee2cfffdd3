// Command echo is the function infra/rie's tests run under the emulator: it
// answers its event, its name and one variable of its environment, fails
// on "fail", and exits on "exit".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

type answer struct {
	Event    json.RawMessage `json:"event"`
	Function string          `json:"function"`
	Secret   string          `json:"secret"`
	Pid      int             `json:"pid"`
}

func main() {
	lambda.Start(func(ctx context.Context, ev json.RawMessage) (answer, error) {
		switch string(ev) {
		case `"fail"`:
			return answer{}, errors.New("asked to fail")
		case `"exit"`:
			os.Exit(3)
		}
		return answer{Event: ev, Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), Secret: os.Getenv("RIE_TEST_SECRET"), Pid: os.Getpid()}, nil
	})
}
