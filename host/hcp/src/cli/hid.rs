//! `hcp hid`: the operator's HID commands, the session log's verification,
//! and the simulated executor.
//!
//! The mediator's state (mode, proposals, the armed device) lives in the
//! running server, so `status`, `mode`, `proposals`, `approve`, `reject` and
//! `rearm` talk to `hcp serve` over HTTP with an operator's credential.
//! `log verify` reads the data directory's database directly; `sim` needs
//! neither.

use super::{DataDir, Outcome, print_fields, print_json};
use anyhow::{Context as _, bail};
use hcp_hid::log::SessionLog;
use hcp_hid::sim::{Flavour, SimConfig, Simulator};
use hcp_hid::wire::KillSwitch;
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Where the server is and who the operator is.
#[derive(Debug, clap::Args)]
pub struct Remote {
    /// The running `hcp serve`.
    #[arg(long, env = "HCP_SERVER", default_value = "http://127.0.0.1:8787")]
    pub(super) server: String,
    /// The operator's bearer credential (from callers.json).
    #[arg(long, env = "HCP_CREDENTIAL", hide_env_values = true)]
    pub(super) credential: String,
}

/// `--json`, for the commands that print what the server answered.
#[derive(Debug, clap::Args)]
pub struct Json {
    /// Print the server's answer as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

/// HID subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum HidCommand {
    /// The mediator's mode, whether execution is armed, and the device's
    /// last status.
    Status {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: Json,
    },
    /// Sets the mode: OBSERVE (record only), SUGGEST (decide, never
    /// execute) or EXECUTE (arms the executor; approved actions run).
    Mode {
        /// OBSERVE, SUGGEST or EXECUTE.
        mode: String,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: Json,
    },
    /// Re-arms execution after a device fault halted it (EXECUTE only).
    Rearm {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: Json,
    },
    /// Proposals, oldest first, with credential warnings and outcomes.
    Proposals {
        /// Only those still waiting for a decision.
        #[arg(long)]
        pending: bool,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: Json,
    },
    /// Approves a proposal (in EXECUTE mode the host executes it now).
    Approve {
        /// Proposal id.
        id: String,
        /// Needed when the proposal carries `credential_warning`: you have
        /// checked that typing this secret-looking text is intended.
        #[arg(long)]
        acknowledge_credential: bool,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: Json,
    },
    /// Rejects a proposal.
    Reject {
        /// Proposal id.
        id: String,
        /// Why (shown to the guest and logged; 1 to 500 characters).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        out: Json,
    },
    /// The hash-chained HID session log.
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
    /// Acts as a HID executor on a pseudo-terminal: prints the pty's path,
    /// then runs until interrupted. Type `kill` (kill switch DISABLED),
    /// `arm` (ARMED) or `status` on standard input.
    Sim(SimArgs),
}

/// Session-log subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum LogCommand {
    /// Checks every entry's checksum and the chain; exit 1 with the first
    /// break (an altered, deleted or reordered entry).
    Verify {
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        data: DataDir,
    },
}

/// Arguments of `hcp hid sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// `reporting` (answers get_status) or `firmware` (the public firmware:
    /// ok/error only).
    #[arg(long, default_value = "reporting")]
    flavour: String,
    /// Append a JSON line per performed action to this file.
    #[arg(long)]
    record: Option<PathBuf>,
    /// The device id it reports.
    #[arg(long, default_value = "sim-hid-0001")]
    device_id: String,
    /// The contract version it reports (`none` for none).
    #[arg(long, default_value = "1")]
    contract_version: String,
}

pub(super) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

fn call(remote: &Remote, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    let url = format!("{}{path}", remote.server.trim_end_matches('/'));
    let auth = format!("Bearer {}", remote.credential);
    let agent = agent();
    let response = match body {
        None if method == "GET" => agent.get(&url).header("Authorization", &auth).call(),
        body => agent
            .post(&url)
            .header("Authorization", &auth)
            .header("Content-Type", "application/json")
            .send(body.unwrap_or_else(|| json!({})).to_string().as_bytes()),
    };
    let mut response =
        response.with_context(|| format!("cannot reach {url} (is `hcp serve` running?)"))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if !(200..300).contains(&status) {
        let message = value["error"]["message"]
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        bail!("{method} {path}: {status}: {message}");
    }
    Ok(value)
}

fn print_status(s: &Value) {
    println!("mode       {}", s["mode"].as_str().unwrap_or("?"));
    let exec = &s["execution"];
    match exec["state"].as_str() {
        Some("armed") => println!(
            "execution  armed ({})",
            exec["device"].as_str().unwrap_or("")
        ),
        Some("halted") => println!(
            "execution  HALTED: {}",
            exec["reason"].as_str().unwrap_or("")
        ),
        _ => println!("execution  off"),
    }
    if s["device_status"].is_null() {
        println!("device     no status reported");
    } else {
        println!("device     {}", s["device_status"]);
    }
}

/// Prints the server's answer as JSON, or for people with `human`.
fn answer(out: &Json, value: &Value, human: fn(&Value)) -> anyhow::Result<()> {
    if out.json {
        print_json(value)
    } else {
        human(value);
        Ok(())
    }
}

/// Posts an operator's decision on proposal `id` and prints the outcome.
fn decide_proposal(remote: &Remote, out: &Json, id: &str, decision: Value) -> anyhow::Result<()> {
    let outcome = call(
        remote,
        "POST",
        &format!("/v1/hid/proposals/{id}"),
        Some(decision),
    )?;
    answer(out, &outcome, print_fields)
}

pub(super) fn run(cmd: HidCommand) -> Outcome {
    match cmd {
        HidCommand::Status { remote, out } => {
            answer(&out, &call(&remote, "GET", "/v1/hid", None)?, print_status)?;
        }
        HidCommand::Mode { mode, remote, out } => {
            let mode = crate::hid::mode(&mode).map_err(anyhow::Error::msg)?;
            let s = call(
                &remote,
                "POST",
                "/v1/hid/mode",
                Some(json!({"mode": mode.as_str()})),
            )?;
            answer(&out, &s, print_status)?;
        }
        HidCommand::Rearm { remote, out } => {
            answer(
                &out,
                &call(&remote, "POST", "/v1/hid/rearm", None)?,
                print_status,
            )?;
        }
        HidCommand::Proposals {
            pending,
            remote,
            out,
        } => {
            let list = call(&remote, "GET", "/v1/hid/proposals", None)?;
            let listed = list["proposals"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| !pending || p["outcome"].is_null());
            if out.json {
                print_json(&listed.collect::<Vec<_>>())?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut shown = 0;
            for p in listed {
                shown += 1;
                let prop = &p["proposal"];
                let warning = if prop["credential_warning"] == true {
                    "  [CREDENTIAL WARNING: looks like a secret]"
                } else {
                    ""
                };
                println!(
                    "{}  {}  {}{warning}",
                    prop["proposal_id"].as_str().unwrap_or("?"),
                    prop["action_type"].as_str().unwrap_or("?"),
                    prop["payload"],
                );
                println!("    session   {}", p["session_id"].as_str().unwrap_or("?"));
                println!("    rationale {}", prop["rationale"].as_str().unwrap_or(""));
                match p["outcome"]["outcome"].as_str() {
                    None => println!("    outcome   waiting for a decision"),
                    Some(o) => println!("    outcome   {o} {}", p["outcome"]),
                }
            }
            if shown == 0 {
                println!("no proposals");
            }
        }
        HidCommand::Approve {
            id,
            acknowledge_credential,
            remote,
            out,
        } => {
            decide_proposal(
                &remote,
                &out,
                &id,
                json!({"decision": "approve", "acknowledge_credential": acknowledge_credential}),
            )?;
        }
        HidCommand::Reject {
            id,
            reason,
            remote,
            out,
        } => {
            decide_proposal(
                &remote,
                &out,
                &id,
                json!({"decision": "reject", "reason": reason}),
            )?;
        }
        HidCommand::Log {
            command: LogCommand::Verify { json, data },
        } => {
            let db = data.path()?.join("hcp.db");
            if !db.exists() {
                bail!("no database at {}", db.display());
            }
            let log = SessionLog::open(&db)?;
            let verified = log.verify();
            if json {
                print_json(&crate::views::log_verification(&verified))?;
                return Ok(if verified.is_ok() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                });
            }
            return Ok(match verified {
                Ok(v) => {
                    println!(
                        "HID session log: {} entries, chain intact (head {})",
                        v.entries,
                        v.head.as_deref().unwrap_or("-")
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    println!("HID session log: BROKEN: {e}");
                    ExitCode::from(1)
                }
            });
        }
        HidCommand::Sim(args) => return sim(args),
    }
    Ok(ExitCode::SUCCESS)
}

fn sim(args: SimArgs) -> Outcome {
    let flavour = match args.flavour.as_str() {
        "reporting" => Flavour::Reporting,
        "firmware" => Flavour::PublicFirmware,
        other => bail!("--flavour {other:?}: expected reporting or firmware"),
    };
    let mut config = SimConfig::new(flavour);
    config.device_id = args.device_id;
    config.record = args.record;
    config.contract_version = (args.contract_version != "none").then_some(args.contract_version);
    let sim = Simulator::start(config)?;
    println!("{}", sim.path());
    {
        use std::io::Write as _;
        std::io::stdout().flush()?;
    }
    let sim = std::sync::Arc::new(sim);
    let console = sim.clone();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            match line.trim() {
                "kill" => {
                    console.set_kill_switch(KillSwitch::Disabled);
                    eprintln!("kill switch DISABLED");
                }
                "arm" => {
                    console.set_kill_switch(KillSwitch::Armed);
                    eprintln!("kill switch ARMED");
                }
                "status" => eprintln!(
                    "mode {}, {} actions performed",
                    console.mode().as_str(),
                    console.performed().len()
                ),
                "" => {}
                other => eprintln!("unknown command {other:?} (kill, arm, status)"),
            }
        }
    });
    super::runtime()?.block_on(super::serve::stop_signal());
    if let Ok(sim) = std::sync::Arc::try_unwrap(sim) {
        sim.stop();
    }
    Ok(ExitCode::SUCCESS)
}
