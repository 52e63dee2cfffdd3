package wire

// What an error answer's details carry: the fields of an invalid
// request, the problems of a refused config or bundle.

// FieldProblem names one bad field of a request: its path in the body or
// query ("input.orderId", "limit") and what is wrong with it.
type FieldProblem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ConfigProblem is one problem of a refused stead.json: a JSON pointer into
// it and what is wrong. Line and Column (1-based) are positions in the
// config text as sent, when known.
type ConfigProblem struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}

// BundleProblem is one problem of a refused bundle, at a file position
// when known.
type BundleProblem struct {
	Code    string `json:"code"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}
