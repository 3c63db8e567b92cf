package main

import "encoding/json"

// registerDiag stands in for bindings/diag.go's until the branches merge.
// TEMPORARY: delete this file at merge.
func registerDiag(name string, fn func(req json.RawMessage) (any, error)) {}
