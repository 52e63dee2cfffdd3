package wire

import (
	"encoding/json"
	"time"
)

// BrokerRecord is one value in an end user's broker data.
type BrokerRecord struct {
	EndUserID  string          `json:"endUserId"`
	Collection string          `json:"collection"`
	Key        string          `json:"key"`
	Value      json.RawMessage `json:"value"`
	UpdatedAt  time.Time       `json:"updatedAt"`
}

// BrokerList is a page of a broker collection in key order.
type BrokerList struct {
	Records    []BrokerRecord `json:"records"`
	NextCursor string         `json:"nextCursor,omitempty"`
}
