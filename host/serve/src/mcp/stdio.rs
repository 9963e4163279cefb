//! `hcp mcp --as <caller>`: the MCP server on the process's standard input
//! and output, for an agent that starts the host as its subprocess.
//!
//! The process acts with the data directory's authority (as `hcp submit
//! --as` does), so only a caller `callers.json` marks `mcp_stdio: true` may
//! be named; the policy in force is asked again on every request, so a
//! reload that takes the mark away stops the next call. Tasks run in this
//! process as `hcp serve` runs them, with its maintenance (approvals that
//! expire, queued tasks started); when the client closes the connection,
//! running tasks get a grace to finish, then are stopped and answered
//! `task_failed` with a receipt, as on a server's shutdown.

use super::{McpServer, Origin};
use crate::engine::Host;
use crate::state::AppState;
use anyhow::{Context as _, Result};
use rmcp::ServiceExt as _;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::sync::Arc;
use std::time::Duration;

/// Settings of `hcp mcp`.
#[derive(Debug, Clone)]
pub struct StdioConfig {
    /// The caller every request is (`--as`).
    pub caller: String,
    /// How long a `tools/call` waits for its task's final answer.
    pub wait: Duration,
    /// How long running tasks may take to finish once the client is gone.
    pub shutdown_grace: Duration,
}

/// The largest JSON-RPC message read from standard input: as large as the
/// HTTP API's body ([`crate::BODY_LIMIT`]); a longer line is dropped (and
/// logged), the connection stays.
const MAX_LINE: usize = crate::BODY_LIMIT;

/// Serves MCP on stdin and stdout until the client closes stdin.
///
/// # Errors
///
/// The caller is unknown or not allowed over stdio; the transport fails.
pub async fn serve_stdio(host: Arc<Host>, config: StdioConfig) -> Result<()> {
    {
        let policy = host.policy();
        let caller = policy
            .caller(&config.caller)
            .with_context(|| format!("--as {}: no such caller in callers.json", config.caller))?;
        if !caller.mcp_stdio {
            anyhow::bail!(
                "--as {}: this caller may not be used over stdio; an operator allows it with \
                 \"mcp_stdio\": true in its entry of callers.json (hcp mcp acts with the data \
                 directory's authority)",
                config.caller
            );
        }
    }
    let state = AppState::new(host);
    let maintenance = tokio::spawn(crate::maintain(state.clone()));
    let server = McpServer::new(
        state.clone(),
        Origin::Stdio(config.caller.clone()),
        config.wait,
    );
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let transport = AsyncRwTransport::new_server(stdin, stdout).with_max_line_length(MAX_LINE);
    let running = server
        .serve(transport)
        .await
        .context("starting the MCP server on stdio")?;
    let quit = running.waiting().await;
    maintenance.abort();
    if let Err(e) = quit {
        tracing::error!("MCP stdio: {e}");
    }
    state.tracker().close();
    if tokio::time::timeout(config.shutdown_grace, state.tracker().wait())
        .await
        .is_err()
    {
        state.interrupt_runs(format!(
            "the MCP client closed the connection and the task outlived the grace of {}s",
            config.shutdown_grace.as_secs()
        ));
        let _ = tokio::time::timeout(Duration::from_secs(30), state.tracker().wait()).await;
    }
    Ok(())
}
