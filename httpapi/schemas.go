package httpapi

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
)

// Schema names in a host's API.
//
// Huma names a struct's schema after its Go type alone and panics when two
// types of one name meet in a registry. This package's types have common
// names (List, Account, Problem...), so a host that registers the list
// service on its own Huma API (Register), where such a name may already be
// taken or be taken later, gets them under names with the prefix
// hostSchemaPrefix instead: YapsList, YapsProblem. An API built from
// HumaConfig (Mount does) is the service's own, and keeps the plain names.

const hostSchemaPrefix = "Yaps"

// ownRegistries holds the schema registries of the APIs built from
// HumaConfig.
var ownRegistries sync.Map

// schemaRefs is the reference prefix of Huma's registries.
const schemaRefs = "#/components/schemas/"

var (
	ownPkg          = reflect.TypeFor[Problem]().PkgPath()
	schemaProvider  = reflect.TypeFor[huma.SchemaProvider]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	// hostRegistries holds the prefixedRegistry of each host registry, so
	// that a second Register on one API finds its schemas.
	hostRegistries sync.Map
)

// registryFor is the registry this package's schemas go to on api.
func registryFor(oapi *huma.OpenAPI) huma.Registry {
	reg := oapi.Components.Schemas
	if _, own := ownRegistries.Load(reg); own || reg == nil {
		return reg
	}
	p, _ := hostRegistries.LoadOrStore(reg, &prefixedRegistry{Registry: reg, prefix: hostSchemaPrefix, types: map[string]reflect.Type{}})
	return p.(*prefixedRegistry)
}

// schemaName is the name of this package's schema base in reg.
func schemaName(reg huma.Registry, base string) string {
	if p, ok := reg.(*prefixedRegistry); ok {
		return p.prefix + base
	}
	return base
}

// prefixedRegistry is a host's registry in which this package's struct
// types are named with prefix; every other type is the host's business.
type prefixedRegistry struct {
	huma.Registry
	prefix string
	types  map[string]reflect.Type // ours, by name, registered through this registry
}

// TypeFromRef knows this package's types, which the host's registry does
// not (Huma's hooks ask while Register adds its operations).
func (r *prefixedRegistry) TypeFromRef(ref string) reflect.Type {
	if t, ok := r.types[strings.TrimPrefix(ref, schemaRefs)]; ok {
		return t
	}
	return r.Registry.TypeFromRef(ref)
}

func (r *prefixedRegistry) Schema(t reflect.Type, allowRef bool, hint string) *huma.Schema {
	dt := t
	for dt.Kind() == reflect.Pointer {
		dt = dt.Elem()
	}
	if !ownStruct(dt) {
		if holdsOwn(dt) {
			// A slice or map of ours: built here, so that its elements
			// come back to this registry (the host's would name them).
			return huma.SchemaFromType(r, t)
		}
		return r.Registry.Schema(t, allowRef, hint)
	}
	m := r.Registry.Map()
	name := r.prefix + dt.Name()
	if r.types[name] != dt {
		if _, taken := m[name]; taken {
			panic(fmt.Sprintf("httpapi: the API already has a schema named %s that is not this package's", name))
		}
		r.types[name] = dt
		m[name] = &huma.Schema{} // a recursive type refers to it meanwhile
		m[name] = huma.SchemaFromType(r, dt)
	}
	if allowRef {
		return &huma.Schema{Ref: schemaRefs + name}
	}
	return m[name]
}

// ownStruct reports whether t is one of this package's struct types that
// Huma would name.
func ownStruct(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t.PkgPath() == ownPkg && t.Name() != "" &&
		!t.Implements(schemaProvider) && !reflect.PointerTo(t).Implements(schemaProvider) &&
		!t.Implements(textUnmarshaler) && !reflect.PointerTo(t).Implements(textUnmarshaler)
}

// holdsOwn reports whether t is a pointer, slice, array or map whose
// elements are one of this package's struct types.
func holdsOwn(t reflect.Type) bool {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return ownStruct(t)
		}
	}
}
