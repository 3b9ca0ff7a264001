package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// printer writes an answer as -o asks: an aligned table for a terminal,
// or the API's JSON (indented) or the same as YAML for scripts.
type printer struct {
	format string
	w      io.Writer
}

// table collects the rows of a table.
type table struct {
	rows [][]string
}

// row adds a row of cells.
func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

// kv adds a row of a two-column key/value table.
func (t *table) kv(key string, value any) { t.row(key, cell(value)) }

// print writes raw (the API's JSON body) as -o asks; the table is
// built by fill, only for -o table.
func (p *printer) print(raw []byte, fill func(t *table)) error {
	switch p.format {
	case "json":
		return p.json(raw)
	case "yaml":
		return p.yaml(raw)
	}
	var t table
	fill(&t)
	return p.table(&t)
}

// json writes raw indented.
func (p *printer) json(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := p.w.Write(buf.Bytes())
	return err
}

// yaml writes raw as YAML, keeping the order of its members.
func (p *printer) yaml(raw []byte) error {
	var node yaml.Node
	if err := yaml.Unmarshal(raw, &node); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	blockStyle(&node)
	enc := yaml.NewEncoder(p.w)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return err
	}
	return enc.Close()
}

// blockStyle turns JSON's flow style into YAML's block style, and quotes
// only the strings that need it.
func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = 0
	}
	if n.Kind == yaml.ScalarNode && n.Style == yaml.DoubleQuotedStyle {
		n.Style = 0
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// table writes t aligned, its first row (the header) as it is, without
// the padding of empty cells at the end of a line.
func (p *printer) table(t *table) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	for _, r := range t.rows {
		for i, c := range r {
			r[i] = strings.ReplaceAll(c, "\t", " ")
		}
		if _, err := fmt.Fprintln(tw, strings.Join(r, "\t")); err != nil {
			return err
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	_, err := io.WriteString(p.w, out.String())
	return err
}

// done reports a change without a body (204): a line in a table, nothing
// for scripts (the exit status says it).
func (p *printer) done(format string, args ...any) error {
	if p.format != "table" {
		return nil
	}
	_, err := fmt.Fprintf(p.w, format+"\n", args...)
	return err
}

// cell formats one value of a table: nil, a nil pointer, an empty
// string, slice or map and the zero time are "-"; a pointer of any kind
// shows what it points to (the generated client's optional fields are
// pointers: *int, *int64, *string, *time.Time, *SomeEnum, …).
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		if v == "" {
			return "-"
		}
		return v
	case time.Time:
		if v.IsZero() {
			return "-"
		}
		return v.UTC().Format("2006-01-02T15:04:05.000Z")
	case map[string]string:
		if len(v) == 0 {
			return "-"
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + v[k]
		}
		return strings.Join(parts, ",")
	case bool:
		if v {
			return "yes"
		}
		return "no"
	case float64:
		return fmt.Sprintf("%.4g", v)
	case float32:
		return cell(float64(v))
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return "-"
		}
		return cell(rv.Elem().Interface())
	case reflect.String: // a named string type: an enum of the client
		return cell(rv.String())
	case reflect.Bool:
		return cell(rv.Bool())
	case reflect.Float32, reflect.Float64:
		return cell(rv.Float())
	case reflect.Slice, reflect.Array:
		if rv.Len() == 0 {
			return "-"
		}
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = cell(rv.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	case reflect.Map:
		if rv.Len() == 0 {
			return "-"
		}
		m := make(map[string]string, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[fmt.Sprint(it.Key().Interface())] = cell(it.Value().Interface())
		}
		return cell(m)
	}
	return fmt.Sprint(v)
}

// body shows a message body in a table: printable text cut to 60
// characters, or how many bytes of base64 there are.
func body(b string, encoding string) string {
	if encoding == "base64" {
		return fmt.Sprintf("<base64, %d bytes>", base64.StdEncoding.DecodedLen(len(b))-strings.Count(b, "="))
	}
	var sb strings.Builder
	n := 0
	for _, r := range b {
		if n == 60 {
			sb.WriteString("…")
			break
		}
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			r = '·'
		}
		sb.WriteRune(r)
		n++
	}
	if sb.Len() == 0 {
		return "-"
	}
	return sb.String()
}

// ms shows milliseconds as a duration.
func ms(v int64) string { return (time.Duration(v) * time.Millisecond).String() }
