package awsstack

import (
	"net/netip"
	"testing"
	"time"
)

// A function's memory bounds it and its sandbox worker together: the
// worker gets what the function's process does not need, a call half; the
// worker's fetch has the owner's allowlist.
func TestSandboxFitsTheFunction(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		memoryMB     int
		worker, call int64
	}{
		{0, 0, 0}, {128, 0, 0}, {129, 1 << 20, 1 << 19}, {512, 384 << 20, 192 << 20}, {3008, 2880 << 20, 1440 << 20},
	} {
		o := sandboxOptions(Config{MemoryMB: c.memoryMB}, nil)
		if o.WorkerMemory != c.worker || o.MemoryLimit != c.call {
			t.Errorf("MemoryMB %d: worker %d, call %d; want %d, %d", c.memoryMB, o.WorkerMemory, o.MemoryLimit, c.worker, c.call)
		}
	}
	allow := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	o := sandboxOptions(Config{EgressAllow: allow}, func() time.Time { return at })
	if len(o.Fetch.Allow) != 1 || o.Fetch.Allow[0] != allow[0] {
		t.Errorf("fetch allow %v; want %v", o.Fetch.Allow, allow)
	}
	if o.Now == nil || !o.Now().Equal(at) {
		t.Error("the sandbox does not have the stack's clock")
	}
	cfg, err := FromEnv(RunnerFunction, func(k string) string {
		return map[string]string{"AWS_REGION": "us-east-1", EnvTable: "t", EnvBucket: "b", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}[k]
	})
	if err != nil || cfg.MemoryMB != 512 {
		t.Errorf("FromEnv: %+v %v", cfg.MemoryMB, err)
	}
}
