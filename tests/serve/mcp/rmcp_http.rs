//! `rmcp`'s Streamable HTTP client transport on the `hyper` client the
//! workspace already builds, for the rmcp client test over `/mcp`.
//!
//! rmcp ships this transport on `reqwest` (`transport-streamable-http-
//! client-reqwest`); `reqwest` is not in the workspace's lock file, and it
//! would bring its own HTTP stack, TLS and connection pool for one test.
//! rmcp's transport takes any client through its `StreamableHttpClient`
//! trait: this one opens a connection per request (HTTP/1.1, plain TCP:
//! the test server listens on loopback), as rmcp's own Unix-socket client
//! does, and reads JSON or server-sent events as the server answers.
//! `/mcp` keeps no MCP sessions (it answers `GET` and `DELETE` with 405),
//! so the client asks for none.

use bytes::Bytes;
use futures_core::stream::BoxStream;
use http::{HeaderName, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// What failed below MCP: the connection, or HTTP.
#[derive(Debug)]
pub(super) struct HyperError(String);

impl std::fmt::Display for HyperError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HyperError {}

fn fail(e: impl std::fmt::Display) -> StreamableHttpError<HyperError> {
    StreamableHttpError::Client(HyperError(e.to_string()))
}

/// The client: stateless, a connection per request.
#[derive(Debug, Clone, Copy)]
pub(super) struct HyperClient;

/// Sends `request` on a new connection to its URI's authority.
async fn send(
    request: Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, StreamableHttpError<HyperError>> {
    let authority = request
        .uri()
        .authority()
        .ok_or_else(|| fail("the URI names no host"))?
        .to_string();
    let stream = tokio::net::TcpStream::connect(&authority)
        .await
        .map_err(fail)?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(fail)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender.send_request(request).await.map_err(fail)
}

/// A request to `uri`, with the credential and the transport's headers.
fn request(
    method: Method,
    uri: &str,
    auth_token: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
) -> Result<http::request::Builder, StreamableHttpError<HyperError>> {
    let parsed: http::Uri = uri.parse().map_err(fail)?;
    let host = parsed
        .authority()
        .ok_or_else(|| fail("the URI names no host"))?
        .to_string();
    let mut builder = Request::builder()
        .method(method)
        .uri(parsed)
        .header(header::HOST, host)
        .header(header::ACCEPT, "application/json, text/event-stream");
    if let Some(token) = auth_token {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    for (name, value) in custom_headers {
        builder = builder.header(name, value);
    }
    Ok(builder)
}

fn content_type_is(response: &http::Response<hyper::body::Incoming>, mime: &str) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|t| t.trim() == mime))
}

impl StreamableHttpClient for HyperClient {
    type Error = HyperError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        _session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let body = serde_json::to_vec(&message)?;
        let request = request(Method::POST, &uri, auth_token, custom_headers)?
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(fail)?;
        let response = send(request).await?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status.is_success() && content_type_is(&response, "text/event-stream") {
            let events: BoxStream<'static, Result<Sse, sse_stream::Error>> =
                Box::pin(SseStream::new(response.into_body()));
            return Ok(StreamableHttpPostResponse::Sse(events, None));
        }
        let is_json = content_type_is(&response, "application/json");
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(fail)?
            .to_bytes();
        if is_json {
            // A result, or a JSON-RPC error (also under a 4xx status).
            if let Ok(message) = serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
                return Ok(StreamableHttpPostResponse::Json(message, None));
            }
        }
        if status.is_success() && bytes.is_empty() {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes)),
        )))
    }

    async fn delete_session(
        &self,
        _uri: Arc<str>,
        _session_id: Arc<str>,
        _auth_token: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        Err(StreamableHttpError::ServerDoesNotSupportDeleteSession)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, sse_stream::Error>>, StreamableHttpError<Self::Error>>
    {
        let mut builder = request(Method::GET, &uri, auth_token, custom_headers)?;
        if let Some(id) = last_event_id {
            builder = builder.header("Last-Event-ID", id);
        }
        let response = send(builder.body(Full::new(Bytes::new())).map_err(fail)?).await?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !response.status().is_success() || !content_type_is(&response, "text/event-stream") {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("GET answered {}", response.status()),
            )));
        }
        Ok(Box::pin(SseStream::new(response.into_body())))
    }
}
