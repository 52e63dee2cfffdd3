package awsstack

import (
	"log/slog"

	"stead/runtime/agent"
)

// modelKeyLookup is how the engine reads a model's API key on Lambda: by
// the environment variable the deployed config names (apiKeyEnv), but never
// one that Lambda or Stead sets (deployment refuses those too; this guards
// configs deployed before that check). A deployment chooses both the variable and
// where the key is sent (baseUrl), so without this a developer key could
// send the function role's credentials (AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN) to a server of its choosing.
func modelKeyLookup(lookup func(string) (string, bool), log *slog.Logger) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if agent.ReservedEnv(name) {
			log.Warn("refused a model API key variable that Lambda or Stead sets; use a variable of your own", "variable", name)
			return "", false
		}
		return lookup(name)
	}
}
