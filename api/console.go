package api

import "stead/console"

// consoleRoutes serves the web console (/console/), the customer status
// page (/status/{runId}) and embed.js next to the API, so they exist
// wherever the API runs (`stead dev`, Lambda) from the same origin. The
// pages are static (package console) and carry their own security
// headers; every credential they use goes to the API routes in the
// Authorization header.
func (s *Server) consoleRoutes() {
	h := console.New()
	for _, p := range console.Routes {
		s.mux.Handle("GET "+p, h)
	}
}
