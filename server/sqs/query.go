package sqs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// The query protocol (older SDKs, the AWS CLI 2.9): a form post (or a GET)
// with Action=<Operation> and the input flattened into numbered keys —
// Attribute.1.Name / Attribute.1.Value for a map of strings,
// AttributeName.1 for a list, MessageAttribute.1.Value.StringValue,
// SendMessageBatchRequestEntry.1.Id for the entries of a batch. The input
// is turned into the JSON protocol's object (queryToJSON) and decoded by
// the same code; the output is written as <Op>Response/<Op>Result XML.

// queryNamespace is the SQS API's XML namespace.
const queryNamespace = "http://queue.amazonaws.com/doc/2012-11-05/"

// decodeQuery reads a query-protocol call.
func (h *Handler) decodeQuery(w http.ResponseWriter, r *http.Request, req *request) error {
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxRequestSize)
	if err := r.ParseForm(); err != nil {
		return errSerialization("the request is not a form: %v", err)
	}
	req.op = r.Form.Get("Action")
	if req.op == "" {
		return errMissing("Action")
	}
	form := r.Form
	// The queue URL may be the request's path (the query protocol posts
	// to the queue's URL).
	if form.Get("QueueUrl") == "" && strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 1 {
		form.Set("QueueUrl", req.base+r.URL.Path)
	}
	req.decode = func(v any) error {
		obj, err := queryToJSON(req.op, form, reflect.TypeOf(v).Elem(), "")
		if err != nil {
			return err
		}
		body, err := json.Marshal(obj)
		if err != nil {
			return errSerialization("%v", err)
		}
		return decodeJSON(body, v)
	}
	return nil
}

// queryListNames are the query names of list members that do not simply
// drop the plural's s.
var queryListNames = map[string]string{
	"QueueUrls": "QueueUrl",
	"TagKeys":   "TagKey",
}

// queryMapNames are the query names of maps: the member's prefix and the
// names of a key and a value.
var queryMapNames = map[string][3]string{
	"Attributes":              {"Attribute", "Name", "Value"},
	"Tags":                    {"Tag", "Key", "Value"},
	"MessageAttributes":       {"MessageAttribute", "Name", "Value"},
	"MessageSystemAttributes": {"MessageSystemAttribute", "Name", "Value"},
}

// entryName is the query name of a batch's entries.
func entryName(op string) string { return op + "RequestEntry" }

// fieldName is the JSON name of a struct field.
func fieldName(f reflect.StructField) string {
	if tag, ok := f.Tag.Lookup("json"); ok {
		if name, _, _ := strings.Cut(tag, ","); name != "" {
			return name
		}
	}
	return f.Name
}

// maxQueryIndex bounds the numbered members read (10 entries, 10
// attributes, 50 tags: more than any valid request has).
const maxQueryIndex = 100

// queryToJSON builds the JSON object of struct type t from the form keys
// under prefix.
func queryToJSON(op string, form url.Values, t reflect.Type, prefix string) (map[string]any, error) {
	obj := map[string]any{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := fieldName(f)
		qname := f.Name
		switch f.Type.Kind() {
		case reflect.String:
			if v, ok := form[prefix+qname]; ok {
				obj[name] = v[0]
			}
		case reflect.Int, reflect.Pointer:
			if v, ok := form[prefix+qname]; ok {
				n, err := strconv.Atoi(v[0])
				if err != nil {
					return nil, errInvalidParameter("Value %s for parameter %s is invalid. Reason: not an integer.", truncate(v[0], 50), qname)
				}
				obj[name] = n
			}
		case reflect.Slice:
			switch {
			case f.Type.Elem().Kind() == reflect.String:
				member := queryListNames[qname]
				if member == "" {
					member = strings.TrimSuffix(qname, "s")
				}
				var list []string
				for n := 1; n <= maxQueryIndex; n++ {
					v, ok := form[fmt.Sprintf("%s%s.%d", prefix, member, n)]
					if !ok {
						break
					}
					list = append(list, v[0])
				}
				if list != nil {
					obj[name] = list
				}
			case f.Type.Elem().Kind() == reflect.Struct && qname == "Entries":
				var list []any
				for n := 1; n <= maxQueryIndex; n++ {
					p := fmt.Sprintf("%s%s.%d.", prefix, entryName(op), n)
					if !hasPrefix(form, p) {
						break
					}
					e, err := queryToJSON(op, form, f.Type.Elem(), p)
					if err != nil {
						return nil, err
					}
					list = append(list, e)
				}
				if list != nil {
					obj[name] = list
				} else if op != "" {
					obj[name] = []any{}
				}
			}
		case reflect.Map:
			names, ok := queryMapNames[qname]
			if !ok {
				continue
			}
			m := map[string]any{}
			for n := 1; n <= maxQueryIndex; n++ {
				p := fmt.Sprintf("%s%s.%d.", prefix, names[0], n)
				key, ok := form[p+names[1]]
				if !ok {
					break
				}
				if f.Type.Elem().Kind() == reflect.String {
					m[key[0]] = form.Get(p + names[2])
					continue
				}
				v := map[string]any{}
				vp := p + names[2] + "."
				if s, ok := form[vp+"DataType"]; ok {
					v["DataType"] = s[0]
				}
				if s, ok := form[vp+"StringValue"]; ok {
					v["StringValue"] = s[0]
				}
				if s, ok := form[vp+"BinaryValue"]; ok {
					v["BinaryValue"] = s[0] // base64 in both protocols
				}
				m[key[0]] = v
			}
			if len(m) > 0 {
				obj[name] = m
			}
		}
	}
	return obj, nil
}

func hasPrefix(form url.Values, p string) bool {
	for k := range form {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// writeQueryResult writes out as the query protocol's XML.
func writeQueryResult(w http.ResponseWriter, req *request, out any, requestID string) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, `<%sResponse xmlns="%s">`, req.op, queryNamespace)
	v := reflect.ValueOf(out)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.NumField() > 0 {
		fmt.Fprintf(&b, "<%sResult>", req.op)
		writeQueryFields(&b, req.op, v)
		fmt.Fprintf(&b, "</%sResult>", req.op)
	}
	fmt.Fprintf(&b, "<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>", requestID, req.op)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// writeElement writes <name>text</name>, text escaped.
func writeElement(b *bytes.Buffer, name, text string) {
	b.WriteString("<" + name + ">")
	_ = xml.EscapeText(b, []byte(text))
	b.WriteString("</" + name + ">")
}

// writeQueryFields writes the fields of struct v as query XML elements.
func writeQueryFields(b *bytes.Buffer, op string, v reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous {
			writeQueryFields(b, op, fv)
			continue
		}
		name := f.Name
		switch fv.Kind() {
		case reflect.String:
			if s := fv.String(); s != "" {
				writeElement(b, name, s)
			}
		case reflect.Bool:
			writeElement(b, name, strconv.FormatBool(fv.Bool()))
		case reflect.Int, reflect.Int64:
			writeElement(b, name, strconv.FormatInt(fv.Int(), 10))
		case reflect.Pointer:
			if !fv.IsNil() {
				writeElement(b, name, fmt.Sprint(fv.Elem().Interface()))
			}
		case reflect.Slice:
			member := queryListNames[name]
			switch {
			case name == "Successful":
				member = strings.TrimSuffix(op, "Request") + "ResultEntry"
			case name == "Failed":
				member = "BatchResultErrorEntry"
			case name == "Results":
				member = op + "ResultEntry"
			case name == "Messages":
				member = "Message"
			case member == "":
				member = strings.TrimSuffix(name, "s")
			}
			for j := 0; j < fv.Len(); j++ {
				e := fv.Index(j)
				if e.Kind() == reflect.String {
					writeElement(b, member, e.String())
					continue
				}
				b.WriteString("<" + member + ">")
				writeQueryFields(b, op, e)
				b.WriteString("</" + member + ">")
			}
		case reflect.Map:
			names, ok := queryMapNames[name]
			if !ok {
				continue
			}
			keys := make([]string, 0, fv.Len())
			for _, k := range fv.MapKeys() {
				keys = append(keys, k.String())
			}
			sort.Strings(keys)
			for _, k := range keys {
				b.WriteString("<" + names[0] + ">")
				writeElement(b, names[1], k)
				switch val := fv.MapIndex(reflect.ValueOf(k)).Interface().(type) {
				case string:
					writeElement(b, names[2], val)
				case attributeValue:
					b.WriteString("<" + names[2] + ">")
					if val.StringValue != nil {
						writeElement(b, "StringValue", *val.StringValue)
					}
					if val.BinaryValue != nil {
						writeElement(b, "BinaryValue", base64.StdEncoding.EncodeToString(val.BinaryValue))
					}
					writeElement(b, "DataType", val.DataType)
					b.WriteString("</" + names[2] + ">")
				}
				b.WriteString("</" + names[0] + ">")
			}
		}
	}
}

// queryErrorResponse is the query protocol's error body.
type queryErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	Detail    string   `xml:"Error>Detail"`
	RequestID string   `xml:"RequestId"`
}

// writeQueryError writes e as the query protocol's ErrorResponse.
func writeQueryError(w http.ResponseWriter, e *apiError, requestID string) {
	typ := "Sender"
	if !e.sender() {
		typ = "Receiver"
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.status)
	body, _ := xml.Marshal(queryErrorResponse{Type: typ, Code: e.code, Message: e.msg, RequestID: requestID})
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}
