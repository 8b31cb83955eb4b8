//! Replays the committed fuzz corpus of the history reader (`fuzz/corpus/history_export/`)
//! through the same calls the cargo-fuzz target makes, on the stable toolchain and in
//! every CI run: CI's quick fuzz build leaves the lab out (it depends on the handler
//! crate), so a crash input copied into the corpus stays a regression test here.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use stormgate_lab::history::{DateOrder, HistoryOptions, LevelScale, read_history};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};

#[test]
fn history_corpus_reads_or_is_refused_and_every_event_read_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/history_export");
    let mut seeds = 0;
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let input = std::fs::read(&path).unwrap();
        seeds += 1;
        // As the fuzz target: one byte of options, the rest is the export.
        let [mode, rest @ ..] = input.as_slice() else {
            continue;
        };
        let options = HistoryOptions {
            date_order: [DateOrder::Auto, DateOrder::DayFirst, DateOrder::MonthFirst]
                [usize::from(mode % 3)],
            level_scale: [LevelScale::Auto, LevelScale::Three, LevelScale::Five]
                [usize::from(mode / 3 % 3)],
            ..HistoryOptions::new(EpochMillis(1_768_197_600_000), 60.0)
        };
        let Ok(history) = read_history(rest, "fuzz", &options) else {
            continue;
        };
        read += 1;
        for event in &history.events {
            let raw = serde_json::to_vec(&event.record(0)).unwrap();
            if let Err(e) = parse_event(&raw, &CdcHeaders::default(), ParseLimits::default()) {
                panic!(
                    "{}: the reader emitted an event the parser refuses: {e}",
                    path.display()
                );
            }
        }
    }
    assert!(seeds > 0, "{} holds no seeds", dir.display());
    assert!(
        read >= 2,
        "the seeds include real exports the reader accepts"
    );
}
