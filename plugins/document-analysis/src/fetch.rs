//! Reading the document: `file:` through `wasi:filesystem` (only inside a
//! granted directory), `http(s):` through `wasi:http` (only to a granted
//! host). The host enforces both; this module only asks.

use hcp_guest::Failure;

/// Largest document read, in bytes.
const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// A fetched document.
pub struct Document {
    pub text: String,
    pub media_type: String,
    pub size: usize,
}

pub fn fetch(uri: &str) -> Result<Document, Failure> {
    if let Some(rest) = uri.strip_prefix("file:") {
        let path = percent_decode(rest.strip_prefix("//").unwrap_or(rest))
            .ok_or_else(|| Failure::input(format!("{uri}: malformed percent-encoding")))?;
        if !path.starts_with('/') {
            return Err(Failure::input(format!(
                "{uri}: a file URI must hold an absolute path"
            )));
        }
        let bytes = read_file(&path)?;
        let media_type = media_type_from_path(&path).to_owned();
        Ok(document(bytes, media_type))
    } else if uri.starts_with("http://") || uri.starts_with("https://") {
        let response = hcp_guest::http::get(uri, MAX_DOCUMENT_BYTES).map_err(|e| match e {
            hcp_guest::http::Error::InvalidUrl(m) | hcp_guest::http::Error::TooLarge(m) => {
                Failure::input(m)
            }
            other => Failure::unavailable(other.to_string()),
        })?;
        let (bytes, content_type) = (response.body, response.content_type);
        let media_type = content_type
            .map(|c| {
                c.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| media_type_from_path(uri).to_owned());
        Ok(document(bytes, media_type))
    } else {
        Err(Failure::input(format!(
            "{uri}: document_uri must be a file: or http(s): URI"
        )))
    }
}

fn document(bytes: Vec<u8>, media_type: String) -> Document {
    Document {
        size: bytes.len(),
        text: String::from_utf8_lossy(&bytes).into_owned(),
        media_type,
    }
}

fn read_file(path: &str) -> Result<Vec<u8>, Failure> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Failure::input(format!("{path}: no such document")),
        _ => Failure::unavailable(format!("{path}: cannot open: {e}")),
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::unavailable(format!("{path}: cannot read: {e}")))?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(Failure::input(format!(
            "{path}: larger than {MAX_DOCUMENT_BYTES} bytes"
        )));
    }
    Ok(bytes)
}

fn media_type_from_path(path: &str) -> &'static str {
    let lower = path.to_ascii_lowercase();
    let lower = lower.split(['?', '#']).next().unwrap_or("");
    if lower.ends_with(".md") || lower.ends_with(".markdown") {
        "text/markdown"
    } else if lower.ends_with(".html") || lower.ends_with(".htm") {
        "text/html"
    } else if lower.ends_with(".pdf") {
        "application/pdf"
    } else {
        "text/plain"
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("/a%20b").as_deref(), Some("/a b"));
        assert_eq!(percent_decode("/a%2"), None);
        assert_eq!(percent_decode("/a%zz"), None);
    }

    #[test]
    fn media_types() {
        assert_eq!(media_type_from_path("/x/paper.MD"), "text/markdown");
        assert_eq!(
            media_type_from_path("https://h/p.pdf?x=1"),
            "application/pdf"
        );
        assert_eq!(media_type_from_path("/x/notes"), "text/plain");
    }
}
