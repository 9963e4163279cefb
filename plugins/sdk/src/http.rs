//! A blocking HTTP GET through `wasi:http/outgoing-handler`.
//!
//! Using it makes the component import `wasi:http`, which only a manifest with
//! `grants.network` may do; the host then admits only the granted
//! destinations.

use std::fmt;

/// A response with a 2xx status.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The `content-type` header, if any.
    pub content_type: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a GET failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not an absolute http(s) URL.
    InvalidUrl(String),
    /// The host refused or could not send the request.
    Refused(String),
    /// The server answered with a non-2xx status.
    Status(String, u16),
    /// The body was larger than allowed.
    TooLarge(String),
    /// The transfer failed midway.
    Transfer(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidUrl(m) | Self::Refused(m) | Self::TooLarge(m) | Self::Transfer(m) => {
                f.write_str(m)
            }
            Self::Status(url, s) => write!(f, "{url}: HTTP status {s}"),
        }
    }
}

/// GETs `url`, reading at most `max_bytes` of body.
///
/// # Errors
///
/// See [`Error`].
pub fn get(url: &str, max_bytes: usize) -> Result<Response, Error> {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, Method, OutgoingRequest, Scheme};
    use wasip2::io::streams::StreamError;

    let (scheme, rest) = match url.split_once("://") {
        Some(("https", rest)) => (Scheme::Https, rest),
        Some(("http", rest)) => (Scheme::Http, rest),
        _ => return Err(Error::InvalidUrl(format!("{url}: not an http(s) URL"))),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(Error::InvalidUrl(format!("{url}: malformed authority")));
    }
    let request = OutgoingRequest::new(Fields::new());
    let bad = |what: &str| Error::InvalidUrl(format!("{url}: invalid {what}"));
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
        .map_err(|e| Error::Refused(format!("{url}: request refused: {e:?}")))?;
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(e))) => return Err(Error::Refused(format!("{url}: {e:?}"))),
        Some(Err(())) | None => return Err(Error::Refused(format!("{url}: no response"))),
    };
    let status = response.status();
    if !(200..300).contains(&status) {
        return Err(Error::Status(url.to_owned(), status));
    }
    let content_type = response
        .headers()
        .get("content-type")
        .first()
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let body = response
        .consume()
        .map_err(|()| Error::Transfer(format!("{url}: body already taken")))?;
    let stream = body
        .stream()
        .map_err(|()| Error::Transfer(format!("{url}: body stream unavailable")))?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > max_bytes {
                    return Err(Error::TooLarge(format!(
                        "{url}: larger than {max_bytes} bytes"
                    )));
                }
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(Error::Transfer(format!(
                    "{url}: reading body: {}",
                    e.to_debug_string()
                )));
            }
        }
    }
    Ok(Response {
        status,
        content_type,
        body: bytes,
    })
}
