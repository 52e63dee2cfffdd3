package cli_test

import (
	"context"
	"fmt"
	"os"

	"stead/cli"
)

// Run is the whole command; Env carries its streams, environment and
// clock, so tests and other programs can drive it in-process.
func ExampleRun() {
	code := cli.Run(context.Background(), cli.Env{
		Stdout: os.Stdout,
		Stderr: os.Stdout,
		Getenv: func(string) string { return "" },
	}, []string{"run", "refunds"})
	fmt.Println("exit status", code)
	// Output:
	// error: --end-user is required: the end user the run acts for, e.g. --end-user demo-user
	// Run 'stead run --help' for usage.
	// exit status 2
}
