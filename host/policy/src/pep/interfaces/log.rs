//! The PEP's rules of `hcp:capability/log`: every capability may log; a
//! line's level must be one of the WIT's.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, Op};
use crate::pep::decide::{Decision, args_invalid, malformed};
use crate::pep::scope::Scope;

/// `log.write`.
#[derive(Debug)]
pub(crate) struct Log;

impl InterfaceRules for Log {
    fn surface(&self, _: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        match (call.op, &call.args) {
            (Op::LogWrite, Args::Log(_)) => Ok(()),
            _ => malformed(call),
        }
    }

    fn arguments(&self, call: &Call<'_>) -> Result<(), Decision> {
        match &call.args {
            Args::Log(a) if !matches!(&*a.level, "trace" | "debug" | "info" | "warn" | "error") => {
                args_invalid(format!(
                    "log level \"{}\" is unknown",
                    a.level.escape_debug()
                ))
            }
            _ => Ok(()),
        }
    }
}
