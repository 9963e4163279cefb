//! The host's phase spans (`tracing` target `hcp::phase`, level TRACE;
//! nothing is recorded unless a subscriber asks for them), timed from
//! their creation to their close: for the benches that report where a
//! task's time goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, filter};

/// Each closed phase span's duration, by name.
#[derive(Debug, Default, Clone)]
pub struct Phases(Arc<Mutex<HashMap<&'static str, Vec<Duration>>>>);

struct Started(Instant);

impl<S> Layer<S> for Phases
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, _: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Started(Instant::now()));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(elapsed) = span.extensions().get::<Started>().map(|s| s.0.elapsed()) else {
            return;
        };
        self.add(span.name(), elapsed);
    }
}

impl Phases {
    /// A subscriber that times the `hcp::phase` spans into these phases
    /// (and records nothing else).
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        tracing_subscriber::registry().with(
            self.clone().with_filter(
                filter::Targets::new().with_target("hcp::phase", tracing::Level::TRACE),
            ),
        )
    }

    /// Records `d` under `name`, as if a span of that name had lasted it.
    pub fn add(&self, name: &'static str, d: Duration) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name)
            .or_default()
            .push(d);
    }

    /// Everything recorded so far, by name (and none left here).
    pub fn take(&self) -> HashMap<&'static str, Vec<Duration>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
