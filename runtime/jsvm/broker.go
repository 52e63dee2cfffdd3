package jsvm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// MemoryBroker is an in-memory Broker, for tests and examples. It is safe
// for concurrent use. The zero value is ready to use.
type MemoryBroker struct {
	mu   sync.Mutex
	data map[string]map[string]json.RawMessage
}

var _ Broker = (*MemoryBroker)(nil)

// Get implements Broker.
func (m *MemoryBroker) Get(ctx context.Context, collection, key string) (json.RawMessage, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[collection][key]
	return bytes.Clone(v), ok, nil
}

// Put implements Broker. It refuses a value that is not valid JSON.
func (m *MemoryBroker) Put(ctx context.Context, collection, key string, value json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !json.Valid(value) {
		return fmt.Errorf("put %s/%s: value is not valid JSON", collection, key)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		m.data = make(map[string]map[string]json.RawMessage)
	}
	if m.data[collection] == nil {
		m.data[collection] = make(map[string]json.RawMessage)
	}
	m.data[collection][key] = bytes.Clone(value)
	return nil
}

// Delete implements Broker.
func (m *MemoryBroker) Delete(ctx context.Context, collection, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.data[collection][key]
	delete(m.data[collection], key)
	return ok, nil
}

// List implements Broker.
func (m *MemoryBroker) List(ctx context.Context, collection string) ([]BrokerItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	items := make([]BrokerItem, 0, len(m.data[collection]))
	for k, v := range m.data[collection] {
		items = append(items, BrokerItem{Key: k, Value: bytes.Clone(v)})
	}
	slices.SortFunc(items, func(a, b BrokerItem) int { return strings.Compare(a.Key, b.Key) })
	return items, nil
}
