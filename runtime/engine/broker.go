package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"stead/runtime/jsvm"
	"stead/store"
)

// storeBroker is the broker handlers get: the store's broker records, scoped
// to the run's project and end user.
type storeBroker struct {
	store store.Store
	scope store.BrokerScope
	now   func() time.Time
}

var _ jsvm.Broker = (*storeBroker)(nil)

func (b *storeBroker) Get(ctx context.Context, collection, key string) (json.RawMessage, bool, error) {
	r, err := b.store.GetBrokerRecord(ctx, b.scope, collection, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return r.Value, true, nil
}

func (b *storeBroker) Put(ctx context.Context, collection, key string, value json.RawMessage) error {
	return b.store.PutBrokerRecord(ctx, store.BrokerRecord{
		ProjectID: b.scope.ProjectID, EndUserID: b.scope.EndUserID,
		Collection: collection, Key: key, Value: value, UpdatedAt: b.now().UTC(),
	})
}

func (b *storeBroker) Delete(ctx context.Context, collection, key string) (bool, error) {
	err := b.store.DeleteBrokerRecord(ctx, b.scope, collection, key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (b *storeBroker) List(ctx context.Context, collection string) ([]jsvm.BrokerItem, error) {
	var items []jsvm.BrokerItem
	cursor := ""
	for {
		page, err := b.store.ListBrokerRecords(ctx, b.scope, collection, cursor, 500)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Items {
			items = append(items, jsvm.BrokerItem{Key: r.Key, Value: r.Value})
		}
		if page.NextCursor == "" {
			return items, nil
		}
		if len(items) >= maxBrokerList {
			return nil, fmt.Errorf("list %s: the collection has more than %d records; keep collections smaller (e.g. one per order status)", collection, maxBrokerList)
		}
		cursor = page.NextCursor
	}
}

// maxBrokerList bounds what one list call returns to a handler.
const maxBrokerList = 1000

// brokerToken is a run's broker token: "brk_<runId>.<mac>", signed with the
// project's key. It grants the run's broker scope while the run is active.
func (e *Engine) brokerToken(ctx context.Context, projectID, runID string) (string, error) {
	key, err := e.SigningKey(ctx, projectID)
	if err != nil {
		return "", err
	}
	return "brk_" + runID + "." + brokerMAC(key, runID), nil
}

func brokerMAC(key []byte, runID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("stead/broker\x00" + runID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// SigningKey returns a project's signing key, which signs its broker and
// customer tokens (cached: keys never change). A key shorter than 32 bytes
// is refused.
func (e *Engine) SigningKey(ctx context.Context, projectID string) ([]byte, error) {
	if k, ok := e.keys.Load(projectID); ok {
		return k.([]byte), nil
	}
	p, err := e.store.GetProject(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("get project %s: %w", projectID, err)
	}
	if len(p.SigningKey) < 32 {
		return nil, fmt.Errorf("project %s has no usable signing key (it must be at least 32 bytes)", projectID)
	}
	e.keys.Store(projectID, p.SigningKey)
	return p.SigningKey, nil
}

// ErrBrokerToken: the token is malformed, forged, or its run is no longer
// active.
var ErrBrokerToken = errors.New("broker token is not valid (runs' broker tokens are valid only while the run is active)")

// BrokerScopeOf checks a broker token and returns the scope it grants: the
// run's project and end user, while the run is queued, running or awaiting
// approval.
func (e *Engine) BrokerScopeOf(ctx context.Context, token string) (store.BrokerScope, error) {
	rest, ok := strings.CutPrefix(token, "brk_")
	if !ok {
		return store.BrokerScope{}, ErrBrokerToken
	}
	runID, mac, ok := strings.Cut(rest, ".")
	if !ok {
		return store.BrokerScope{}, ErrBrokerToken
	}
	r, err := e.store.GetRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return store.BrokerScope{}, ErrBrokerToken
	}
	if err != nil {
		return store.BrokerScope{}, err
	}
	key, err := e.SigningKey(ctx, r.ProjectID)
	if err != nil {
		return store.BrokerScope{}, err
	}
	if !hmac.Equal([]byte(mac), []byte(brokerMAC(key, runID))) || r.Status.Terminal() {
		return store.BrokerScope{}, ErrBrokerToken
	}
	return store.BrokerScope{ProjectID: r.ProjectID, EndUserID: r.EndUserID}, nil
}
