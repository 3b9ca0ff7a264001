package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"sort"
)

// PATCH on topics and groups takes a JSON merge patch (RFC 7396): the
// members it names replace the resource's, null removes one (the field
// takes its default), and arrays are replaced as a whole. The handler
// renders the current resource as its PUT request, merges the patch into
// it and validates the result exactly like a PUT, so a PATCH can express
// nothing a PUT could not.

// mergePatchType is the media type of a JSON merge patch.
const mergePatchType = "application/merge-patch+json"

// requireMergePatch refuses with 415 a PATCH whose body is not declared as
// a merge patch (application/merge-patch+json, or plain application/json).
// A JSON Patch (RFC 6902, application/json-patch+json) is refused too: it
// is a list of operations, not a document to merge.
func requireMergePatch(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Accept-Patch", mergePatchType)
		mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || (mediaType != mergePatchType && mediaType != "application/json") {
			WriteError(w, r, fmt.Errorf("%w: %q; PATCH takes a JSON merge patch (RFC 7396): Content-Type %s or application/json",
				ErrUnsupportedMediaType, r.Header.Get("Content-Type"), mergePatchType))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readMergePatch reads a merge patch body: a JSON object (a patch of a
// whole resource that is not an object would replace it by a non-object).
func readMergePatch(r *http.Request) (map[string]any, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fmt.Errorf("%w: the request body is empty; a JSON merge patch object is required", ErrMalformedRequest)
	}
	var patch any
	if err := decodeLoose(body, &patch); err != nil {
		return nil, err
	}
	obj, ok := patch.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: a merge patch must be a JSON object naming the fields to change", ErrMalformedRequest)
	}
	return obj, nil
}

// decodeLoose decodes one JSON value into dst keeping numbers exact.
func decodeLoose(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return fmt.Errorf("%w: unexpected data after the JSON value", ErrMalformedRequest)
	}
	return nil
}

// mergePatch applies patch to target (RFC 7396 section 2, MergePatch).
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for name, value := range p {
		if value == nil {
			delete(t, name)
			continue
		}
		t[name] = mergePatch(t[name], value)
	}
	return t
}

// applyMergePatch merges patch into current (a request payload holding the
// resource as it is) and strictly decodes the result into dst: unknown
// fields and wrong types are ErrMalformedRequest.
func applyMergePatch(current any, patch map[string]any, dst any) error {
	b, err := json.Marshal(current)
	if err != nil {
		return err
	}
	var doc any
	if err := decodeLoose(b, &doc); err != nil {
		return err
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		return err
	}
	return decodeJSON(merged, dst)
}

// readJSONFields is readJSON that also returns the names of the top-level
// members the body gave, sorted (for errors that name them).
func readJSONFields(r *http.Request, dst any, optional bool) ([]string, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: the request body is empty; a JSON object is required", ErrMalformedRequest)
	}
	if err := decodeJSON(body, dst); err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	_ = json.Unmarshal(body, &members) // it decoded into dst: an object
	fields := make([]string, 0, len(members))
	for name := range members {
		fields = append(fields, name)
	}
	sort.Strings(fields)
	return fields, nil
}
