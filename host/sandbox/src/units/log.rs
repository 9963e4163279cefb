//! `hcp:capability/log`: structured log lines into the task's log. A line
//! the PEP denies is dropped (`write` returns nothing) and the denial noted.

use super::context::HcpCtx;
use crate::bindings::hcp::capability::log as wit_log;
use crate::pep::Call;
use crate::tasklog::{LogLevel, LogSource};

impl wit_log::Host for HcpCtx {
    async fn write(
        &mut self,
        level: wit_log::Level,
        message: String,
        fields: Vec<wit_log::Field>,
    ) -> wasmtime::Result<()> {
        self.host_calls += 1;
        let (level, name) = match level {
            wit_log::Level::Trace => (LogLevel::Trace, "trace"),
            wit_log::Level::Debug => (LogLevel::Debug, "debug"),
            wit_log::Level::Info => (LogLevel::Info, "info"),
            wit_log::Level::Warn => (LogLevel::Warn, "warn"),
            wit_log::Level::Error => (LogLevel::Error, "error"),
        };
        let fields: Vec<(String, String)> = fields.into_iter().map(|f| (f.key, f.value)).collect();
        // `write` returns nothing: a denied line is dropped (and noted).
        if self.govern(&Call::log(name, &message, &fields)).is_ok() {
            self.log.push(LogSource::Log, level, &message, &fields);
        }
        Ok(())
    }
}

/// The sandbox unit of `hcp:capability/log`: every capability has it.
pub(crate) const UNIT: super::unit::Unit<crate::task::TaskState> = super::unit::Unit {
    interface: "hcp:capability/log",
    audit: super::unit::always,
    link: |l, _, _| {
        crate::bindings::hcp::capability::log::add_to_linker::<
            crate::task::TaskState,
            super::context::HcpData,
        >(l, |s| &mut s.hcp)
    },
};
