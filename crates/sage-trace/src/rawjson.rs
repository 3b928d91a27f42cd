//! JSON pointers resolved over the raw bytes of a trace file, without building the file's
//! `serde_json::Value`: a container is read as the byte ranges of its children (members with
//! their unescaped keys, or elements), and only the value the pointer names is parsed. A
//! parsed 4 MB AG2 trace held ~8 MB of `Value` for the whole run; the ranges of its large
//! containers are a few hundred kilobytes. Resolves exactly as `json_pointer` over the parsed
//! value (tested below).

use serde::de::{Deserializer as _, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::ops::Range;

/// The value at JSON pointer `pointer` in `v`: exactly `v.pointer(pointer)` (RFC 6901 as
/// serde_json resolves it), without copying each reference token that has no `~` escape
/// (serde_json allocates two strings per token; adapters and the raw store resolve a pointer
/// per field of every record).
pub fn json_pointer<'a>(v: &'a serde_json::Value, pointer: &str) -> Option<&'a serde_json::Value> {
    if pointer.is_empty() {
        return Some(v);
    }
    if !pointer.starts_with('/') {
        return None;
    }
    pointer.split('/').skip(1).try_fold(v, |target, raw| {
        let token: std::borrow::Cow<str> = if raw.contains('~') {
            raw.replace("~1", "/").replace("~0", "~").into()
        } else {
            raw.into()
        };
        match target {
            serde_json::Value::Object(map) => map.get(token.as_ref()),
            serde_json::Value::Array(list) => json_index(&token).and_then(|i| list.get(i)),
            _ => None,
        }
    })
}

/// An array index token as serde_json reads one (no sign, no leading zero).
pub(crate) fn json_index(s: &str) -> Option<usize> {
    if s.starts_with('+') || (s.starts_with('0') && s.len() != 1) {
        return None;
    }
    s.parse().ok()
}

/// A JSON value's children as byte ranges of the file.
#[derive(Debug, PartialEq)]
pub(crate) enum Children {
    /// Members in document order (a repeated key keeps every occurrence; the last wins, as
    /// it does in a parsed value).
    Object(Vec<(String, Range<usize>)>),
    Array(Vec<Range<usize>>),
    Scalar,
}

/// The byte range of the first JSON value in `data[from..]` (the rest is not read: the line
/// of a JSON Lines file, or a document). The whole value is checked to be JSON.
pub(crate) fn first_value(data: &[u8], from: usize) -> Result<Range<usize>, serde_json::Error> {
    let slice = &data[from..];
    let raw: &RawValue = serde_json::Deserializer::from_slice(slice)
        .into_iter::<&RawValue>()
        .next()
        .unwrap_or_else(|| Err(serde::de::Error::custom("no JSON value on this line")))?;
    Ok(range_in(data, raw))
}

/// The children of the value at `at` (a range from [`first_value`] or from a parent's
/// children, so valid JSON).
pub(crate) fn children(data: &[u8], at: Range<usize>) -> Result<Children, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(&data[at]);
    de.deserialize_any(KidsVisitor { data })
}

/// Resolve one reference token against `kids`: the member's or element's range.
pub(crate) fn child(kids: &Children, token: &str) -> Option<Range<usize>> {
    match kids {
        Children::Object(members) => members
            .iter()
            .rev()
            .find(|(k, _)| k == token)
            .map(|(_, r)| r.clone()),
        Children::Array(items) => json_index(token).and_then(|i| items.get(i).cloned()),
        Children::Scalar => None,
    }
}

fn range_in(data: &[u8], raw: &RawValue) -> Range<usize> {
    let s = raw.get();
    // A raw value borrows from `data`: its offset is the distance between the pointers.
    let start = s.as_ptr() as usize - data.as_ptr() as usize;
    start..start + s.len()
}

struct KidsVisitor<'a> {
    data: &'a [u8],
}

impl<'de> Visitor<'de> for KidsVisitor<'de> {
    type Value = Children;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Children, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let raw: &'de RawValue = map.next_value()?;
            members.push((key, range_in(self.data, raw)));
        }
        Ok(Children::Object(members))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Children, A::Error> {
        let mut items = Vec::new();
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            items.push(range_in(self.data, raw));
        }
        Ok(Children::Array(items))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Children, E> {
        Ok(Children::Scalar)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Children, E> {
        Ok(Children::Scalar)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Children, E> {
        Ok(Children::Scalar)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Children, E> {
        Ok(Children::Scalar)
    }
    fn visit_str<E>(self, _: &str) -> Result<Children, E> {
        Ok(Children::Scalar)
    }
    fn visit_unit<E>(self) -> Result<Children, E> {
        Ok(Children::Scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Resolve `pointer` over the bytes, as the raw store does.
    fn by_ranges(data: &[u8], pointer: &str) -> Option<serde_json::Value> {
        let mut at = first_value(data, 0).ok()?;
        if !pointer.is_empty() {
            if !pointer.starts_with('/') {
                return None;
            }
            for raw in pointer.split('/').skip(1) {
                let token = raw.replace("~1", "/").replace("~0", "~");
                at = child(&children(data, at).ok()?, &token)?;
            }
        }
        serde_json::from_slice(&data[at]).ok()
    }

    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            (-1e9f64..1e9).prop_map(serde_json::Value::from),
            "[a-c~/\"\\\\é\n ]{0,4}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
                prop::collection::vec(("[a-c~/0-2]{0,2}", inner), 0..5)
                    .prop_map(|kv| { serde_json::Value::Object(kv.into_iter().collect()) }),
            ]
        })
    }

    proptest::proptest! {
        /// `json_pointer` resolves every pointer exactly as serde_json's `Value::pointer`.
        #[test]
        fn json_pointer_is_value_pointer(p in "(/(a|b~1c|~0d|~|~2|0|1|01|\\+1|x|)){0,4}|a|") {
            let v = serde_json::json!({
                "a": [{"b/c": 1, "~d": [true, {"x": null}]}, "s"],
                "b/c": {"~d": {"": 2}, "0": [3]},
                "~d": 4, "": {"": {"a": 5}}, "0": ["z", {"1": 6}],
            });
            proptest::prop_assert_eq!(json_pointer(&v, &p), v.pointer(&p));
        }
    }

    proptest! {
        /// Over the bytes (compact, pretty, or with a repeated key written in), a pointer
        /// names the value `json_pointer` finds in the parsed document.
        #[test]
        fn ranges_resolve_as_the_parsed_value(
            v in json(),
            p in "(/([a-c~/0-2]|~0|~1|01|\\+1){0,2}){0,4}|a",
            pretty in any::<bool>(),
        ) {
            let text = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            };
            for text in [text.clone(), text.replacen('{', "{\"a\": 0, ", 1)] {
                let Ok(parsed) = serde_json::from_str::<serde_json::Value>(&text) else {
                    continue;
                };
                let want = json_pointer(&parsed, &p).cloned();
                prop_assert_eq!(by_ranges(text.as_bytes(), &p), want, "{} at {:?}", text, p);
            }
        }
    }

    #[test]
    fn the_first_value_of_a_line_and_bad_json() {
        let data = b"{\"a\": 1}\n[2, {\"b\": \"x\"}]\nnot json\n";
        assert_eq!(first_value(data, 0).unwrap(), 0..8);
        let second = first_value(data, 9).unwrap();
        assert_eq!(&data[second.clone()], b"[2, {\"b\": \"x\"}]");
        let kids = children(data, second).unwrap();
        let obj = child(&kids, "1").unwrap();
        assert_eq!(
            &data[child(&children(data, obj).unwrap(), "b").unwrap()],
            b"\"x\""
        );
        assert!(first_value(data, 25).is_err());
        assert!(first_value(b"{\"a\": [1,}", 0).is_err());
    }
}
