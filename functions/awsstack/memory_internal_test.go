package awsstack

import "testing"

// A function's memory bounds it and its sandbox worker together: the
// worker gets what the function's process does not need, a call half.
func TestSandboxMemoryFitsTheFunction(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		memoryMB     int
		worker, call int64
	}{
		{0, 0, 0}, {128, 0, 0}, {512, 384 << 20, 192 << 20}, {3008, 2880 << 20, 1440 << 20},
	} {
		w, call := sandboxMemory(c.memoryMB)
		if w != c.worker || call != c.call {
			t.Errorf("sandboxMemory(%d) = %d, %d; want %d, %d", c.memoryMB, w, call, c.worker, c.call)
		}
	}
	cfg, err := FromEnv(RunnerFunction, func(k string) string {
		return map[string]string{"AWS_REGION": "us-east-1", EnvTable: "t", EnvBucket: "b", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}[k]
	})
	if err != nil || cfg.MemoryMB != 512 {
		t.Errorf("FromEnv: %+v %v", cfg.MemoryMB, err)
	}
}
