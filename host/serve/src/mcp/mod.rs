//! The host as a Model Context Protocol server: every `tools/call` is an
//! HCP task.
//!
//! Two transports, one handler ([`McpServer`], on the official Rust SDK
//! `rmcp`):
//!
//! - stdio (`hcp mcp --as <caller>`, [`serve_stdio`]): an agent starts the
//!   host as its subprocess; the caller is the one named, allowed only
//!   where `callers.json` says `mcp_stdio: true` (checked at start and again
//!   on every request, under the policy in force);
//! - Streamable HTTP at `/mcp` on `hcp serve` ([`http`]): every request
//!   authenticated with the caller's bearer credential as the HTTP API is,
//!   its `Origin` and `Host` checked against DNS rebinding, over TLS where
//!   the server serves it.
//!
//! `tools/list` is, for the caller, the installed capabilities it is
//! listed for ([`tools`]); `tools/call` builds a `task_submit` and hands it
//! to [`crate::engine::Host::submit_task`], the engine's one submission
//! path, then waits for the task's final answer and maps it to a tool
//! result ([`call`]). Nothing here decides admission: a call to a tool the
//! caller may not invoke is the gate's refusal, with its receipt.

mod call;
pub(crate) mod http;
mod stdio;
mod tools;
mod watch;

pub use stdio::{StdioConfig, serve_stdio};

use crate::state::AppState;
use hcp_policy::Caller;
use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::time::Duration;

/// The MCP revisions spoken: 2026-07-28 (the current one, without an
/// `initialize` handshake), and the earlier revisions that negotiate one
/// (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05), as `rmcp` 3.11 knows
/// them.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = ProtocolVersion::KNOWN_VERSIONS;

/// How long a `tools/call` waits for its task's final answer by default
/// (`--mcp-wait`): a task still waiting then (for an operator's approval,
/// say) is answered with its id and how to follow it.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// How often a session that began with `initialize` is looked at, to
/// stop sending it tool list changes once it is gone.
const SESSION_CHECK: Duration = Duration::from_secs(5);

/// Where the requests of a server come from.
#[derive(Debug, Clone)]
enum Origin {
    /// stdio: the caller named when the host was started (`--as`).
    Stdio(String),
    /// Streamable HTTP: each request's own credential ([`http::HttpCaller`]).
    Http,
}

/// How a request's caller was authenticated, as the engine's [`Auth`]
/// will say it, and by which MCP transport.
///
/// [`Auth`]: crate::engine::Auth
#[derive(Debug, Clone)]
pub(crate) enum Proof {
    /// stdio: the local process, with the data directory's authority.
    Transport(String),
    /// A bearer credential (and whether it crossed a network in clear).
    Bearer { token: String, in_clear: bool },
}

/// The caller of one request, under the policy in force.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) caller: Caller,
    pub(crate) proof: Proof,
    /// `mcp/stdio` or `mcp/http`: recorded with the task.
    pub(crate) transport: &'static str,
}

/// The MCP server: one per stdio connection, one per HTTP service (each
/// request carries its own caller).
#[derive(Clone)]
pub(crate) struct McpServer {
    state: AppState,
    origin: Origin,
    wait: Duration,
    /// Counts the changes of the tools ([`watch`]).
    tool_changes: tokio::sync::watch::Receiver<u64>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("origin", &self.origin)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server of `state`; the tools' watcher starts with it (call it
    /// on a runtime).
    fn new(state: AppState, origin: Origin, wait: Duration) -> Self {
        let tool_changes = watch::tools(state.host.clone());
        Self {
            state,
            origin,
            wait,
            tool_changes,
        }
    }

    /// Who sends the request in `context`, under the policy in force now.
    fn identity(&self, context: &RequestContext<RoleServer>) -> Result<Identity, McpError> {
        let policy = self.state.host.policy();
        match &self.origin {
            Origin::Stdio(id) => {
                let caller = policy.caller(id).ok_or_else(|| {
                    McpError::invalid_request(
                        format!("caller {id:?} is no longer in callers.json"),
                        None,
                    )
                })?;
                if !caller.mcp_stdio {
                    return Err(McpError::invalid_request(
                        format!(
                            "caller {id:?} may not be used over stdio: callers.json does not \
                             say mcp_stdio: true for it"
                        ),
                        None,
                    ));
                }
                Ok(Identity {
                    caller: caller.clone(),
                    proof: Proof::Transport(id.clone()),
                    transport: "mcp/stdio",
                })
            }
            Origin::Http => {
                // The middleware of /mcp put it there (`http::authenticate`):
                // a request without it never reached the handler.
                let held = context
                    .extensions
                    .get::<::http::request::Parts>()
                    .and_then(|p| p.extensions.get::<http::HttpCaller>())
                    .ok_or_else(|| McpError::invalid_request("not authenticated", None))?;
                let caller = policy
                    .authenticate_bearer(&held.token)
                    .ok_or_else(|| McpError::invalid_request("unknown credential", None))?;
                Ok(Identity {
                    caller: caller.clone(),
                    proof: Proof::Bearer {
                        token: held.token.clone(),
                        in_clear: held.in_clear,
                    },
                    transport: "mcp/http",
                })
            }
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("hcp", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Each tool is a capability installed on this HCP host; each call is an HCP task: \
             admitted by the host's gate under its policy, governed while it runs, recorded as \
             signed receipts. Optional request _meta keys: hcp/intent (the task's goal), \
             hcp/constraints (task_submit.constraints: data_classification, max_duration, ...), \
             hcp/capability_version, hcp/message_id (a retried call with the same id gets the \
             first call's answer).",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let who = self.identity(&context)?;
        let host = self.state.host.clone();
        let tools = tokio::task::spawn_blocking(move || tools::list(&host, &who.caller))
            .await
            .map_err(|e| McpError::internal_error(format!("tools/list: {e}"), None))?
            .map_err(|e| {
                tracing::error!("tools/list: {e:#}");
                McpError::internal_error("the installed capabilities cannot be read", None)
            })?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let who = self.identity(&context)?;
        call::call(&self.state, who, request, context, self.wait)
            .await
            .map(CallToolResponse::from)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Only the tools change (resources are read by the URIs results
        // name; nothing lists them).
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.tool_changes.clone();
        changes.borrow_and_update();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if context.accepted().tools_list_changed == Some(true)
                        && context.sink().notify_tool_list_changed().await.is_err()
                    {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// A client of a revision before 2026-07-28 (one that began with
    /// `initialize`) has no `subscriptions/listen`: as those revisions
    /// say, a server that declares `tools.listChanged` sends it
    /// `notifications/tools/list_changed` on its session's own stream at
    /// each change, for as long as the session lasts.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut changes = self.tool_changes.clone();
        changes.borrow_and_update();
        let peer = context.peer;
        tokio::spawn(async move {
            let mut alive = tokio::time::interval(SESSION_CHECK);
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    _ = alive.tick() => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let who = self.identity(&context)?;
        call::read_artifact(&self.state, &who, &request.uri)
            .await
            .map(ReadResourceResponse::from)
    }
}
