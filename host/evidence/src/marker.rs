//! The store's mark (`hcp_store::durable`), written by a thread of its
//! own: the receipt writer hands it what each sealed batch left in the
//! store, after that batch committed, and goes on with the next batch while
//! a record of the mark's file is overwritten and synced
//! ([`MarkFile`]). The mark never runs ahead of
//! the store (it is sent only once its batch is durable); when several
//! arrive while one is being written, only the newest is written. Dropping
//! the marker waits for the last mark handed to it.

use hcp_store::durable::{Mark, MarkFile};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

/// The mark's thread.
pub(super) struct Marker {
    tx: Option<Sender<Mark>>,
    thread: Option<JoinHandle<()>>,
}

impl Marker {
    /// Starts the thread that writes the marks of `dir`. When no thread
    /// can be started, marks are written by the caller ([`Marker::mark`]).
    pub(super) fn start(dir: PathBuf) -> Self {
        let (tx, rx) = channel();
        let thread = std::thread::Builder::new()
            .name("hcp-store-mark".into())
            .spawn({
                let dir = dir.clone();
                move || write_marks(&dir, &rx)
            });
        match thread {
            Ok(thread) => Self {
                tx: Some(tx),
                thread: Some(thread),
            },
            Err(e) => {
                tracing::warn!("the store's mark is written inline: {e}");
                Self {
                    tx: None,
                    thread: None,
                }
            }
        }
    }

    /// Hands `mark` (of a batch already committed) to the thread, or
    /// writes it here when there is none.
    pub(super) fn mark(&self, dir: &std::path::Path, mark: Mark) {
        let mark = match &self.tx {
            Some(tx) => match tx.send(mark) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => mark,
        };
        write(dir, &mark);
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn write_marks(dir: &std::path::Path, rx: &Receiver<Mark>) {
    let mut file = MarkFile::new(dir);
    while let Ok(mut mark) = rx.recv() {
        // Only the newest of those waiting: each covers the ones before.
        while let Ok(newer) = rx.try_recv() {
            mark = newer;
        }
        if let Err(e) = file.write(&mark) {
            tracing::warn!("the store's mark: {e:#}");
        }
    }
}

/// A mark that cannot be written stays behind the store, which the
/// startup check allows.
fn write(dir: &std::path::Path, mark: &Mark) {
    if let Err(e) = mark.write(dir) {
        tracing::warn!("the store's mark: {e:#}");
    }
}
