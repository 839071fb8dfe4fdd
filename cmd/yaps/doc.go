package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/yaps-dev/yaps/yaps/yjs"
)

func init() {
	register("doc", "inspect and merge Yjs update files (json|merge)", runDoc)
}

const docUsage = `usage:
  yaps doc json [--map NAME]... [--array NAME]... [--text NAME]... [--xml NAME]... [--pretty] FILE...
      apply the v1 update files in order to an empty document and print it as
      JSON (Yjs toJSON semantics; roots not named by a flag are inferred;
      binary values print as {"$bin": "<base64>"}, BigInts as {"$bigint": "<digits>"})
  yaps doc merge FILE... > OUT
      merge the v1 update files into one update written to stdout`

func runDoc(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, docUsage)
		return errors.New("doc: missing subcommand (json|merge)")
	}
	switch args[0] {
	case "json":
		return runDocJSON(ctx, args[1:], stdout, stderr)
	case "merge":
		return runDocMerge(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stderr, docUsage)
		return nil
	default:
		fmt.Fprintln(stderr, docUsage)
		return fmt.Errorf("doc: unknown subcommand %q", args[0])
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runDocJSON(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doc json", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var maps, arrays, texts, xmls stringList
	fs.Var(&maps, "map", "treat root `NAME` as a Y.Map (repeatable)")
	fs.Var(&arrays, "array", "treat root `NAME` as a Y.Array (repeatable)")
	fs.Var(&texts, "text", "treat root `NAME` as a Y.Text (repeatable)")
	fs.Var(&xmls, "xml", "treat root `NAME` as a Y.XmlFragment (repeatable)")
	pretty := fs.Bool("pretty", false, "indent the JSON output")
	fs.Usage = func() { fmt.Fprintln(stderr, docUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("doc json: no update files given")
	}
	seen := map[string]string{}
	for _, g := range []struct {
		kind  string
		names []string
	}{{"map", maps}, {"array", arrays}, {"text", texts}, {"xml", xmls}} {
		for _, n := range g.names {
			if prev, dup := seen[n]; dup && prev != g.kind {
				return fmt.Errorf("doc json: root %q given as both --%s and --%s", n, prev, g.kind)
			}
			seen[n] = g.kind
		}
	}

	doc, err := applyFiles(ctx, fs.Args())
	if err != nil {
		return err
	}
	// Type the named roots before reading, like calling doc.getMap(name) in Yjs.
	for _, n := range maps {
		doc.GetMap(n)
	}
	for _, n := range arrays {
		doc.GetArray(n)
	}
	for _, n := range texts {
		doc.GetText(n)
	}
	for _, n := range xmls {
		doc.GetXmlFragment(n)
	}
	out := jsonValue(doc.ToJSON())
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if *pretty {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("doc json: %w", err)
	}
	return nil
}

// applyFiles applies update files in order to a fresh document.
func applyFiles(ctx context.Context, files []string) (*yjs.Doc, error) {
	doc := yjs.NewDoc()
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("doc: %w", err)
		}
		if err := doc.ApplyUpdate(b, nil); err != nil {
			return nil, fmt.Errorf("doc: apply %s: %w", f, err)
		}
	}
	return doc, nil
}

func runDocMerge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doc merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, docUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("doc merge: no update files given")
	}
	updates := make([][]byte, 0, fs.NArg())
	for _, f := range fs.Args() {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("doc merge: %w", err)
		}
		updates = append(updates, b)
	}
	merged, err := yjs.MergeUpdates(updates)
	if err != nil {
		return fmt.Errorf("doc merge: %w", err)
	}
	if _, err := stdout.Write(merged); err != nil {
		return fmt.Errorf("doc merge: %w", err)
	}
	return nil
}

// jsonValue converts a toJSON value from the engine into something
// encoding/json prints the way JSON.stringify would print the Yjs value, except
// that binary becomes {"$bin": base64} (JSON.stringify would print an object
// of indices) and BigInt {"$bigint": "digits"} (JSON.stringify throws). Non-finite floats and undefined array elements become null and
// undefined properties are left out, as in JavaScript.
func jsonValue(v any) any {
	switch x := v.(type) {
	case nil, bool, string:
		return x
	case []byte:
		return map[string]any{"$bin": base64.StdEncoding.EncodeToString(x)}
	case yjs.BigInt:
		return map[string]any{"$bigint": strconv.FormatInt(int64(x), 10)}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e == any(yjs.Undefined) {
				continue // JSON.stringify drops undefined properties
			}
			out[k] = jsonValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() // also yjs.BigInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint()
	case reflect.Float32, reflect.Float64:
		return jsonValue(rv.Float())
	case reflect.Struct:
		if rv.NumField() == 0 { // yjs.Undefined
			return nil
		}
	}
	return v
}
