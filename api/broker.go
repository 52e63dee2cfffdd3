package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"stead/api/wire"
	"stead/store"
)

// brokerScope returns the broker scope a request may touch: a broker
// token's own, or, for a project key, the end user named by ?endUserId=.
// It also checks the collection (and key, when the route has one).
func brokerScope(r *http.Request, c *caller) (store.BrokerScope, error) {
	q := newQuery(r)
	eu := q.str("endUserId")
	var sc store.BrokerScope
	switch c.kind {
	case brokerCred:
		sc = c.scope
		if eu != "" && eu != sc.EndUserID {
			return sc, forbidden("a broker token reaches only its own run's end user")
		}
	default:
		if p := textProblem(eu, true, maxIDLen); p != "" {
			q.bad("endUserId", "%s (a project key names the end user whose broker data it reads or writes)", p)
		}
		sc = store.BrokerScope{ProjectID: c.actor.ProjectID, EndUserID: eu}
	}
	if err := store.CheckBrokerCollection(r.PathValue("collection")); err != nil {
		q.bad("collection", "%s", err)
	}
	if r.Pattern != "GET /v1/broker/{collection}" {
		if err := store.CheckBrokerKey(r.PathValue("key")); err != nil {
			q.bad("key", "%s", err)
		}
	}
	return sc, q.err()
}

func brokerNotFound(sc store.BrokerScope, collection, key string) error {
	return notFound("no broker record %s/%s for end user %q", collection, key, sc.EndUserID)
}

// getBroker: GET /v1/broker/{collection}/{key}.
func (s *Server) getBroker(w http.ResponseWriter, r *http.Request, c *caller) error {
	sc, err := brokerScope(r, c)
	if err != nil {
		return err
	}
	col, key := r.PathValue("collection"), r.PathValue("key")
	rec, err := s.store.GetBrokerRecord(r.Context(), sc, col, key)
	if errors.Is(err, store.ErrNotFound) {
		return brokerNotFound(sc, col, key)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, brokerOf(rec))
	return nil
}

type putBrokerRequest struct {
	// Value is any JSON but null, read strictly with the body (no name
	// twice, valid UTF-8, bounded depth).
	Value json.RawMessage `json:"value"`
}

// putBroker: PUT /v1/broker/{collection}/{key} {value} → 200 with the
// record (created or replaced).
func (s *Server) putBroker(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req putBrokerRequest
	if err := readBody(r, s.cfg.MaxBody, &req); err != nil {
		return err
	}
	sc, err := brokerScope(r, c)
	if err != nil {
		return err
	}
	if isNull(req.Value) {
		return invalidField("value", "is required: any JSON value but null (DELETE removes a record)")
	}
	rec := store.BrokerRecord{
		ProjectID: sc.ProjectID, EndUserID: sc.EndUserID,
		Collection: r.PathValue("collection"), Key: r.PathValue("key"),
		Value: req.Value, UpdatedAt: s.now(),
	}
	if err := s.store.PutBrokerRecord(r.Context(), rec); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, brokerOf(rec))
	return nil
}

// deleteBroker: DELETE /v1/broker/{collection}/{key} → 204.
func (s *Server) deleteBroker(w http.ResponseWriter, r *http.Request, c *caller) error {
	sc, err := brokerScope(r, c)
	if err != nil {
		return err
	}
	col, key := r.PathValue("collection"), r.PathValue("key")
	err = s.store.DeleteBrokerRecord(r.Context(), sc, col, key)
	if errors.Is(err, store.ErrNotFound) {
		return brokerNotFound(sc, col, key)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listBroker: GET /v1/broker/{collection}?cursor=&limit= → records in key
// order.
func (s *Server) listBroker(w http.ResponseWriter, r *http.Request, c *caller) error {
	sc, err := brokerScope(r, c)
	if err != nil {
		return err
	}
	q := newQuery(r)
	limit := q.limit()
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.store.ListBrokerRecords(r.Context(), sc, r.PathValue("collection"), q.str("cursor"), limit)
	if err != nil {
		return err
	}
	out := wire.BrokerList{Records: make([]wire.BrokerRecord, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, rec := range page.Items {
		out.Records = append(out.Records, brokerOf(rec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
