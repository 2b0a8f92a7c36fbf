package openapi_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/berthdev/berth/internal/openapi"
)

// TestOpenAPIValidates: an independent OpenAPI implementation
// (pb33f/libopenapi, a test-only dependency) builds the document's model
// without errors and finds it valid against the OpenAPI 3.1 schema. The
// control: the same document with a parameter in a place OpenAPI does
// not have is invalid.
func TestOpenAPIValidates(t *testing.T) {
	t.Parallel()
	b, err := openapi.JSON(routes(t))
	if err != nil {
		t.Fatal(err)
	}
	if problems := oasProblems(t, b); len(problems) > 0 {
		for _, p := range problems {
			t.Error(p)
		}
	}
	broken := bytes.Replace(b, []byte(`"in": "query"`), []byte(`"in": "nowhere"`), 1)
	if len(oasProblems(t, broken)) == 0 {
		t.Error(`a parameter "in": "nowhere" passed validation: the check cannot fail`)
	}
}

// oasProblems lists what libopenapi finds wrong with document b.
func oasProblems(t *testing.T, b []byte) []string {
	t.Helper()
	doc, err := libopenapi.NewDocument(b)
	if err != nil {
		return []string{fmt.Sprintf("libopenapi.NewDocument: %v", err)}
	}
	var out []string
	if _, err := doc.BuildV3Model(); err != nil {
		out = append(out, fmt.Sprintf("BuildV3Model: %v", err))
	}
	v, errs := validator.NewValidator(doc)
	for _, e := range errs {
		out = append(out, fmt.Sprintf("NewValidator: %v", e))
	}
	if v == nil {
		return out
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			out = append(out, e.Message+": "+e.Reason)
			for _, s := range e.SchemaValidationErrors {
				out = append(out, fmt.Sprintf("  %s at %s", s.Reason, s.FieldPath))
			}
		}
	}
	return out
}
