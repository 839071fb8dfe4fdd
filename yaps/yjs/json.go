package yjs

import "encoding/json"

// JSON marshaling follows Yjs toJSON, so values from ToJSON, ToSlice,
// Get and deltas can be passed to encoding/json directly.

// MarshalJSON renders undefined as null (JSON has no undefined).
func (undefinedValue) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// MarshalJSON renders the map like Map.ToJSON; undefined properties are
// left out, as JSON.stringify does.
func (m *Map) MarshalJSON() ([]byte, error) { return json.Marshal(dropUndefined(m.ToJSON())) }

// MarshalJSON renders the array like Array.ToJSON.
func (a *Array) MarshalJSON() ([]byte, error) { return json.Marshal(dropUndefined(a.ToJSON())) }

// dropUndefined removes undefined-valued properties from nested maps.
func dropUndefined(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, el := range x {
			if _, ok := el.(undefinedValue); !ok {
				out[k] = dropUndefined(el)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = dropUndefined(el)
		}
		return out
	}
	return v
}

// MarshalJSON renders the text as a string, like Yjs toJSON.
func (t *Text) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// MarshalJSON renders the fragment as XML text, like Yjs toJSON.
func (f *XmlFragment) MarshalJSON() ([]byte, error) { return json.Marshal(f.String()) }

// MarshalJSON renders the element as XML text, like Yjs toJSON.
func (e *XmlElement) MarshalJSON() ([]byte, error) { return json.Marshal(e.String()) }

// MarshalJSON renders the text as XML text, like Yjs toJSON.
func (t *XmlText) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// MarshalJSON renders the hook's map.
func (h *XmlHook) MarshalJSON() ([]byte, error) { return json.Marshal(dropUndefined(h.ToJSON())) }

// MarshalJSON renders all roots like Doc.ToJSON.
func (d *Doc) MarshalJSON() ([]byte, error) { return json.Marshal(dropUndefined(d.ToJSON())) }
