//! Streamable HTTP at `/mcp` on `hcp serve`.
//!
//! Each request passes [`guard`] before `rmcp`'s service reads it:
//!
//! - its `Host` must be an IP address, `localhost`, or a name the operator
//!   allowed (`--mcp-allowed-host`): a page a browser loaded from a name
//!   that now resolves to this host (DNS rebinding) is refused, 403;
//! - an `Origin`, if it sends one (browsers do), must be one the operator
//!   allowed (`--mcp-allowed-origin`): any other is refused, 403;
//! - its caller is the bearer credential of `callers.json`, as on the HTTP
//!   API: missing or unknown, 401, before its body is read.
//!
//! The caller travels to the handler as a request extension
//! ([`HttpCaller`]), with whether the credential crossed a network in
//! clear (the engine refuses data above T2 so, as on the HTTP API). TLS is
//! the server's own: `/mcp` is served over HTTPS wherever the API is.
//! Requests are stateless (no MCP session is kept between them: each
//! names its caller), their bodies at most [`crate::BODY_LIMIT`] (413), and
//! answers stream as server-sent events with keep-alives, so that a call
//! waiting for its task keeps its connection alive.

use super::{McpServer, Origin};
use crate::error::ApiError;
use crate::listen::Transport;
use crate::request::bearer;
use crate::state::AppState;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use std::time::Duration;

/// Settings of `/mcp`.
#[derive(Debug, Clone)]
pub struct McpHttpConfig {
    /// `Origin`s a browser-based client may send (`scheme://host[:port]`).
    pub allowed_origins: Vec<String>,
    /// Host names (beyond IP addresses and `localhost`) requests may name.
    pub allowed_hosts: Vec<String>,
    /// How long a `tools/call` waits for its task's final answer.
    pub wait: Duration,
}

impl Default for McpHttpConfig {
    fn default() -> Self {
        Self {
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            wait: super::DEFAULT_WAIT,
        }
    }
}

/// The caller of an MCP request, as [`guard`] authenticated it.
#[derive(Debug, Clone)]
pub(crate) struct HttpCaller {
    /// Its bearer credential (the engine checks it again at the gate).
    pub(crate) token: String,
    /// It came in plaintext from beyond loopback.
    pub(crate) in_clear: bool,
}

/// The `/mcp` route.
pub(crate) fn router(state: AppState, config: &McpHttpConfig) -> Router {
    // One server (and one watcher of the tools) for every request.
    let server = McpServer::new(state.clone(), Origin::Http, config.wait);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        StreamableHttpServerConfig::default()
            // Checked by `guard`, with the server's own errors.
            .disable_allowed_hosts()
            .disable_allowed_origins()
            .with_legacy_session_mode(false)
            .with_json_response(false)
            .with_sse_keep_alive(Some(Duration::from_secs(15)))
            .with_max_request_body_bytes(crate::BODY_LIMIT),
    );
    let guarded = Arc::new(config.clone());
    Router::new()
        .route_service("/mcp", service)
        .route_layer(axum::middleware::from_fn_with_state(
            (state, guarded),
            guard,
        ))
}

/// The checks of every `/mcp` request, before `rmcp` reads it.
async fn guard(
    State((state, config)): State<(AppState, Arc<McpHttpConfig>)>,
    mut request: Request,
    next: Next,
) -> Response {
    match admit(&state, &config, request.headers()) {
        Ok(token) => {
            let in_clear = request
                .extensions()
                .get::<Transport>()
                .is_some_and(Transport::in_clear_beyond_loopback);
            request
                .extensions_mut()
                .insert(HttpCaller { token, in_clear });
            next.run(request).await
        }
        Err(refused) => refused.into_response(),
    }
}

/// The credential of a request that passes the checks.
fn admit(
    state: &AppState,
    config: &McpHttpConfig,
    headers: &HeaderMap,
) -> Result<String, ApiError> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !host_allowed(host, &config.allowed_hosts) {
        return Err(ApiError::forbidden(format!(
            "Host {host:?} is not this server's: /mcp answers requests to an IP address, \
             localhost, or a name given with --mcp-allowed-host (DNS rebinding)"
        )));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !config
            .allowed_origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(origin))
        {
            return Err(ApiError::forbidden(format!(
                "Origin {origin:?} may not use /mcp; allow a browser-based client's origin \
                 with --mcp-allowed-origin"
            )));
        }
    }
    let token = bearer(headers)?;
    state
        .host
        .policy()
        .authenticate_bearer(token)
        .ok_or_else(|| ApiError::unauthorized("unknown credential"))?;
    Ok(token.to_owned())
}

/// Whether a `Host` header names this server: an IP address (a name
/// rebound to this host is never one), `localhost`, or an allowed name.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        match rest.split_once(']') {
            Some((ip, _)) => return ip.parse::<std::net::Ipv6Addr>().is_ok(),
            None => return false,
        }
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    if name.is_empty() {
        return false;
    }
    name.parse::<std::net::Ipv4Addr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || allowed
            .iter()
            .any(|a| a.eq_ignore_ascii_case(name) || a.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn hosts_that_name_this_server() {
        let none: &[String] = &[];
        for ok in [
            "127.0.0.1:8787",
            "localhost:8787",
            "LOCALHOST",
            "[::1]:8787",
            "10.0.0.5",
        ] {
            assert!(host_allowed(ok, none), "{ok}");
        }
        for refused in [
            "evil.example:8787",
            "evil.example",
            "",
            ":8787",
            "[nope]:1",
            "localhost.evil.example",
        ] {
            assert!(!host_allowed(refused, none), "{refused}");
        }
        let named = ["hcp.lab.example".to_owned()];
        assert!(host_allowed("hcp.lab.example:8443", &named));
        assert!(!host_allowed("other.lab.example:8443", &named));
    }
}
