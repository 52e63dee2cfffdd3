package strictjson_test

import (
	"encoding/json"
	"fmt"

	"stead/strictjson"
)

func ExampleUnmarshal() {
	var req struct {
		EndUserID string          `json:"endUserId"`
		Input     json.RawMessage `json:"input"`
	}
	for _, body := range []string{
		`{"endUserId":"alice","ENDUSERID":"mallory"}`,
		`{"endUserId":"alice","endUserId":"mallory"}`,
		"{\"endUserId\":\"eu\xff\"}",
		`{"endUserId":"alice","input":{"items":[{"id":1,"id":2}]}}`,
		`{"endUserId":"alice","input":{"orderId":"o-1"}}`,
	} {
		fmt.Println(strictjson.Unmarshal([]byte(body), &req))
	}
	// Output:
	// ENDUSERID: is not a known field; names are case-sensitive: did you mean "endUserId"?
	// endUserId: appears more than once in its object; send each name once
	// endUserId: is not valid UTF-8; send text as UTF-8
	// input.items[0].id: appears more than once in its object; send each name once
	// <nil>
}
