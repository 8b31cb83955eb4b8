//! Fuzzes the storm lab's history reader (`stormgate replay --history`): any bytes read as
//! a ServiceNow export give a typed refusal or events, never a panic, and every event it
//! gives is one the product's event parser accepts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormgate_lab::history::{DateOrder, HistoryOptions, LevelScale, read_history};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};

fuzz_target!(|input: &[u8]| {
    // One byte of options, the rest is the export.
    let [mode, rest @ ..] = input else {
        return;
    };
    let options = HistoryOptions {
        date_order: [DateOrder::Auto, DateOrder::DayFirst, DateOrder::MonthFirst]
            [usize::from(mode % 3)],
        level_scale: [LevelScale::Auto, LevelScale::Three, LevelScale::Five]
            [usize::from(mode / 3 % 3)],
        ..HistoryOptions::new(EpochMillis(1_768_197_600_000), 60.0)
    };
    if let Ok(history) = read_history(rest, "fuzz", &options) {
        for event in &history.events {
            let raw = serde_json::to_vec(&event.record(0)).unwrap_or_default();
            if let Err(e) = parse_event(&raw, &CdcHeaders::default(), ParseLimits::default()) {
                panic!("the reader emitted an event the parser refuses: {e}");
            }
        }
    }
});
