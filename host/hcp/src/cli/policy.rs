//! `hcp policy reload`: asks the running `hcp serve` to reload its policy
//! directory (`POST /v1/policy/reload`, with an operator's credential). The
//! server checks the whole set first and keeps the set in force on any
//! problem; both outcomes are receipts (`policy.reload`). The server, not
//! this command, reads the files: the directory is the one `hcp serve` was
//! started with.

use super::Outcome;
use super::hid::{Json, Remote, agent};
use super::print_json;
use anyhow::{Context as _, bail};
use serde_json::Value;
use std::process::ExitCode;

/// Policy subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Reloads the server's policy directory: prints the old and new hash
    /// (exit 0), or every problem found with the set in force kept (exit 1).
    /// Sending SIGHUP to `hcp serve` does the same.
    Reload {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: Json,
    },
}

pub(super) fn run(cmd: PolicyCommand) -> Outcome {
    let PolicyCommand::Reload { remote, out } = cmd;
    let path = "/v1/policy/reload";
    let url = format!("{}{path}", remote.server.trim_end_matches('/'));
    let mut response = agent()
        .post(&url)
        .header("Authorization", &format!("Bearer {}", remote.credential))
        .header("Content-Type", "application/json")
        .send(&b"{}"[..])
        .with_context(|| format!("cannot reach {url} (is `hcp serve` running?)"))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    let hash = |name: &str| body[name].as_str().unwrap_or("?").to_owned();
    if out.json && matches!(status, 200 | 422) {
        print_json(&body)?;
        return Ok(if status == 200 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    match status {
        200 if body["changed"] == true => {
            println!(
                "policy reloaded: {} -> {}",
                hash("old_hash"),
                hash("new_hash")
            );
            Ok(ExitCode::SUCCESS)
        }
        200 => {
            println!("policy unchanged: {}", hash("new_hash"));
            Ok(ExitCode::SUCCESS)
        }
        422 => {
            println!(
                "policy reload refused: {}",
                body["error"]["message"].as_str().unwrap_or("")
            );
            for p in body["error"]["problems"].as_array().into_iter().flatten() {
                let pointer = p["pointer"].as_str().unwrap_or("");
                println!(
                    "  {}{}{pointer}: {}",
                    p["file"].as_str().unwrap_or("?"),
                    if pointer.is_empty() { "" } else { " " },
                    p["message"].as_str().unwrap_or("")
                );
            }
            Ok(ExitCode::from(1))
        }
        _ => {
            let message = body["error"]["message"]
                .as_str()
                .map_or_else(|| body.to_string(), str::to_owned);
            bail!("POST {path}: {status}: {message}")
        }
    }
}
