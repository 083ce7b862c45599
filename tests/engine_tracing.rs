//! Tracing spans of runs and nodes.
//!
//! This test lives alone in its binary on purpose: `tracing` caches each
//! callsite's interest process-wide, so a test that runs without a subscriber
//! in a parallel thread of the same binary can make the spans invisible here;
//! alone, it can install a global subscriber that every thread sees.

mod support;

use planwright::{Engine, RunOptions, ThreadId};
use std::sync::Arc;
use support::*;

/// A `MakeWriter` collecting formatted `tracing` output.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[test]
fn runs_and_nodes_have_tracing_spans() {
    let out = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(out.clone())
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber)
        .expect("the only subscriber of this binary");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let engine = Engine::new(counter_graph().compile().unwrap()).await;
        engine
            .run(
                ThreadId::new("traced"),
                WalkUpdate::default().target(1),
                RunOptions::default(),
            )
            .await
            .unwrap();
    });
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("run{graph=counter thread=traced"), "{text}");
    assert!(text.contains("node{node=inc task="), "{text}");
    assert!(text.contains("node{node=done task="), "{text}");
}
