//! Reading a JSON document a user wrote (a case manifest, a results file, a key): a parse
//! error names the field path (`anchor.fragment`), not only a line and column, and an empty
//! file says so instead of "EOF while parsing".

use serde::de::DeserializeOwned;

/// Why a document could not be read: one line a person can act on (the field path, the
/// line and column).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JsonError(pub String);

impl From<JsonError> for String {
    fn from(e: JsonError) -> String {
        e.0
    }
}

/// Parse `text` as `T`.
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T, JsonError> {
    parse_text(text).map_err(JsonError)
}

fn parse_text<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    if text.trim().is_empty() {
        return Err("empty file (a JSON document was expected)".into());
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            inner.to_string()
        } else {
            format!("at `{path}`: {inner}")
        }
    })?;
    // as serde_json::from_str: nothing but whitespace may follow the document
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct Anchor {
        fragment: String,
    }
    #[derive(serde::Deserialize, Debug)]
    struct M {
        anchor: Anchor,
    }

    #[test]
    fn a_wrong_type_names_the_field_path() {
        let e = parse::<M>(r#"{"anchor": {"fragment": 7}}"#).unwrap_err().0;
        assert!(e.starts_with("at `anchor.fragment`: invalid type"), "{e}");
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn an_empty_file_says_empty() {
        assert_eq!(
            parse::<M>(" \n").unwrap_err().to_string(),
            "empty file (a JSON document was expected)"
        );
    }

    #[test]
    fn a_good_document_parses() {
        let m = parse::<M>(r#"{"anchor": {"fragment": "x"}}"#).unwrap();
        assert_eq!(m.anchor.fragment, "x");
    }

    #[test]
    fn trailing_text_is_refused() {
        let e = parse::<M>(r#"{"anchor": {"fragment": "x"}} x"#)
            .unwrap_err()
            .0;
        assert!(e.contains("trailing"), "{e}");
    }
}
