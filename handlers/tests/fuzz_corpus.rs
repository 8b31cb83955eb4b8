//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the same calls the
//! cargo-fuzz targets make, on the stable toolchain and in every CI run: a crash input
//! copied into the corpus stays a regression test even where cargo-fuzz cannot run.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use stormgate_handlers::invocation::{InvocationRequest, KafkaBatch, decode_string};
use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};
use stormgate_shared::log_bounding::{BoundedLog, BoundingLimits, bound_text};

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{} holds no seeds", dir.display());
    inputs
}

#[test]
fn invocation_corpus_decodes_without_panic_and_the_host_forms_decode() {
    let mut decoded = 0;
    for (path, bytes) in corpus("invocation_payload") {
        let Ok(request) = InvocationRequest::from_slice(&bytes) else {
            continue;
        };
        decoded += 1;
        for (name, value) in &request.data {
            if let Ok(batch) = KafkaBatch::decode(value, name) {
                assert_eq!(
                    batch.accepted().count() + batch.rejected().count(),
                    batch.events.len(),
                    "{}",
                    path.display()
                );
            }
            let _ = decode_string(value, name);
            let _ = request.timer(name);
            let _ = request.queue_message::<serde_json::Value>(name);
        }
        let _ = request.metadata.dequeue_count();
    }
    assert!(decoded >= 4, "the seeds are real host payloads");
}

#[test]
fn ticket_event_corpus_parses_or_is_rejected_and_the_complete_seed_is_accepted() {
    let mut accepted = 0;
    for (_, bytes) in corpus("ticket_event") {
        let Some((&selector, value)) = bytes.split_first() else {
            continue;
        };
        // The fuzz target's header selection, for the seeds' selectors.
        let headers = CdcHeaders {
            action: match selector & 0x07 {
                1 => Some("insert".into()),
                2 => Some("update".into()),
                _ => None,
            },
            table_name: (selector >> 6 == 1).then(|| "incident".into()),
        };
        if let Ok(ticket) = parse_event(value, &headers, ParseLimits::default()) {
            accepted += 1;
            let _ = ticket.people();
            let _ = ticket.alarm_lines().count();
        }
    }
    // `update_incident` is a complete record; the other seeds are rejections on purpose.
    assert_eq!(accepted, 1, "the complete seed parses");
}

#[test]
fn log_bounding_corpus_stays_within_its_caps() {
    for (path, bytes) in corpus("log_bounding") {
        let [a, b, head_percent, rest @ ..] = bytes.as_slice() else {
            continue;
        };
        let limits = BoundingLimits {
            max_bytes: usize::from(u16::from_le_bytes([*a, *b])),
            head_percent: *head_percent,
        };
        let bounded = bound_text(&String::from_utf8_lossy(rest), limits);
        let rendered = bounded.render();
        assert!(rendered.len() <= limits.max_bytes, "{}", path.display());
        assert_eq!(
            rendered.len(),
            bounded.report.bytes_out,
            "{}",
            path.display()
        );
        let _ = BoundedLog::parse_rendered(&rendered, bounded.report);
    }
}
