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
        let (bytes, content_type) = http_get(uri)?;
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

/// GET `url` through `wasi:http/outgoing-handler`; returns the body and the
/// `content-type` header.
fn http_get(url: &str) -> Result<(Vec<u8>, Option<String>), Failure> {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, Method, OutgoingRequest, Scheme};
    use wasip2::io::streams::StreamError;

    let (scheme, rest) = match url.split_once("://") {
        Some(("https", rest)) => (Scheme::Https, rest),
        Some(("http", rest)) => (Scheme::Http, rest),
        _ => return Err(Failure::input(format!("{url}: not an http(s) URL"))),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(Failure::input(format!("{url}: malformed authority")));
    }
    let request = OutgoingRequest::new(Fields::new());
    let bad = |what: &str| Failure::input(format!("{url}: invalid {what}"));
    request
        .set_method(&Method::Get)
        .map_err(|()| bad("method"))?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| bad("scheme"))?;
    request
        .set_authority(Some(authority))
        .map_err(|()| bad("authority"))?;
    request
        .set_path_with_query(Some(path))
        .map_err(|()| bad("path"))?;
    let pending = outgoing_handler::handle(request, None)
        .map_err(|e| Failure::unavailable(format!("{url}: request refused: {e:?}")))?;
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(e))) => {
            return Err(Failure::unavailable(format!("{url}: {e:?}")));
        }
        Some(Err(())) | None => {
            return Err(Failure::unavailable(format!("{url}: no response")));
        }
    };
    let status = response.status();
    if !(200..300).contains(&status) {
        return Err(Failure::unavailable(format!("{url}: HTTP status {status}")));
    }
    let content_type = response
        .headers()
        .get("content-type")
        .first()
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let body = response
        .consume()
        .map_err(|()| Failure::unavailable(format!("{url}: body already taken")))?;
    let stream = body
        .stream()
        .map_err(|()| Failure::unavailable(format!("{url}: body stream unavailable")))?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > MAX_DOCUMENT_BYTES {
                    return Err(Failure::input(format!(
                        "{url}: larger than {MAX_DOCUMENT_BYTES} bytes"
                    )));
                }
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(Failure::unavailable(format!(
                    "{url}: reading body: {}",
                    e.to_debug_string()
                )));
            }
        }
    }
    Ok((bytes, content_type))
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
