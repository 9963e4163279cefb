//! The PEP's rules of `hcp:capability/log`: every capability may log; a
//! line's level must be one of the WIT's.

use super::{Args, Call, InterfaceRules, OwnArgs, de, flagged_text, malformed};
use crate::pep::cut::{Cutter, Text, t};
use crate::pep::error::CallError;
use crate::pep::scope::Scope;
use crate::pep::threat::{Exposure, Scan, Signals};
use crate::pep::verdict::{Decision, args_invalid};
use hcp_contracts::interfaces::Op;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// What a log field counts in a call's text beside its key and value (its
/// place in the canonical form), so that fields with empty text count too.
pub(crate) const FIELD_BYTES: usize = 8;

/// `log.write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogArgs<'a> {
    /// Structured fields, `[key, value]`.
    pub fields: Cow<'a, [(String, String)]>,
    /// `trace` … `error`.
    pub level: Text<'a>,
    /// The message.
    pub message: Text<'a>,
}

impl<'a> Call<'a> {
    /// `log.write`.
    pub fn log(level: &'a str, message: &'a str, fields: &'a [(String, String)]) -> Self {
        Self {
            op: Op::LogWrite,
            target: Text::Borrowed(""),
            args: Args::Log(LogArgs {
                fields: Cow::Borrowed(fields),
                level: t(level),
                message: t(message),
            }),
        }
    }
}

impl OwnArgs for LogArgs<'_> {
    type Static = LogArgs<'static>;

    fn into_static(self) -> LogArgs<'static> {
        LogArgs {
            fields: Cow::Owned(self.fields.into_owned()),
            level: Cow::Owned(self.level.into_owned()),
            message: Cow::Owned(self.message.into_owned()),
        }
    }

    /// The message and the fields' text.
    fn budget_bytes(&self, _target: &str) -> u64 {
        let fields: usize = self.fields.iter().map(|(k, v)| k.len() + v.len()).sum();
        (self.message.len() + fields) as u64
    }

    fn text_len(&self) -> usize {
        self.level.len()
            + self.message.len()
            + self
                .fields
                .iter()
                .map(|(k, v)| k.len() + v.len() + FIELD_BYTES)
                .sum::<usize>()
    }

    /// The level before the target; the message and the fields after it.
    fn cut(&self, c: &mut Cutter) -> LogArgs<'static> {
        LogArgs {
            fields: Cow::Owned(Vec::new()),
            level: c.cut(&self.level),
            message: Cow::Owned(String::new()),
        }
    }

    /// Fields past the budget are dropped.
    fn cut_bulk(&self, kept: &mut LogArgs<'static>, c: &mut Cutter) {
        kept.message = c.cut(&self.message);
        let mut fields = Vec::new();
        for (k, v) in self.fields.iter() {
            // A field costs its place beside its text, as in `text_len`:
            // empty ones are not kept without end.
            if !c.spend(FIELD_BYTES) {
                break;
            }
            fields.push((c.cut(k).into_owned(), c.cut(v).into_owned()));
        }
        kept.fields = Cow::Owned(fields);
    }

    fn scan(&self, s: &Scan, signals: &mut Signals) {
        s.scan(&self.message, Exposure::TEXT, signals);
        for (k, v) in self.fields.iter() {
            s.scan(k, Exposure::NAME, signals);
            s.scan(v, Exposure::TEXT, signals);
        }
    }

    /// The message, a field's key, and a value by its key (a field named
    /// `password` holds a secret whatever its text).
    fn flagged(&self) -> bool {
        flagged_text(&self.message)
            || self
                .fields
                .iter()
                .any(|(k, v)| flagged_text(k) || hcp_contracts::credential::flagged(Some(k), v))
    }

    fn kept(&self, pointer: &str) -> bool {
        pointer == "/level"
    }
}

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

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(Args::Log(de(op, raw)?))
    }
}
