//! `hcp mcp --as <caller>`: the host as an MCP server on stdin and stdout,
//! for an agent that starts it as its subprocess (`hcp_serve::mcp`).

use super::{HostDirs, Outcome};
use crate::engine::{Host, HostConfig, HostPaths};
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `hcp mcp`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Serves the Model Context Protocol on standard input and output \
(JSON-RPC, one message a line; MCP 2026-07-28, and the earlier revisions that begin with \
initialize), for an agent that starts the host as its subprocess. Every installed capability \
the caller may invoke is a tool; every tools/call is an HCP task of that caller, through the \
same gate, policy, approvals and receipts as over HTTP (its admission receipt names the \
transport, mcp/stdio). Logs go to stderr.\n\n\
The process acts with the data directory's authority, so the caller must be allowed over stdio \
by an operator: \"mcp_stdio\": true in its entry of callers.json. Over the network, use /mcp on \
`hcp serve` with the caller's bearer credential instead. When the client closes standard input, \
running tasks get --shutdown-grace to finish, then are stopped and answered task_failed. See \
docs/mcp.md."
)]
pub struct McpArgs {
    /// The caller every request is (an entry of callers.json with
    /// "mcp_stdio": true).
    #[arg(long = "as", value_name = "CALLER")]
    caller: String,
    /// How long a tools/call waits for its task's final answer (ISO 8601);
    /// a task still waiting then (for an operator's approval, say) is
    /// answered with its id and how to follow it.
    #[arg(long, env = "HCP_MCP_WAIT", default_value = "PT5M")]
    wait: String,
    /// How long tasks still running when the client goes away may take to
    /// finish (ISO 8601).
    #[arg(long, default_value = "PT30S")]
    shutdown_grace: String,
    #[command(flatten)]
    dirs: HostDirs,
}

pub(super) fn run(args: McpArgs) -> Outcome {
    let paths = args.dirs.paths()?;
    let duration = |flag: &str, text: &str| {
        hcp_contracts::IsoDuration::parse(text)
            .map(|d| d.get())
            .map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
    };
    let wait = duration("wait", &args.wait)?;
    if wait.is_zero() {
        anyhow::bail!("--wait: must be longer than zero");
    }
    let shutdown_grace = duration("shutdown-grace", &args.shutdown_grace)?;
    crate::store::durable::check_at_startup(&paths.data_dir)?;
    let host = Arc::new(Host::open(
        HostPaths {
            data_dir: paths.data_dir.clone(),
            cache_dir: paths.cache_dir.clone(),
            policies_dir: paths.policies_dir.clone(),
        },
        HostConfig::default(),
    )?);
    super::runtime()?.block_on(crate::serve::mcp::serve_stdio(
        host,
        crate::serve::mcp::StdioConfig {
            caller: args.caller,
            wait,
            shutdown_grace,
        },
    ))?;
    Ok(ExitCode::SUCCESS)
}
