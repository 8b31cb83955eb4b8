//! Fuzzes the ticket-event parser: any Kafka value with any CDC headers yields a ticket or
//! a typed rejection, never a panic, and an accepted ticket keeps its own invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};

/// The first byte picks the CDC headers, so header handling is fuzzed with the body.
fn headers(selector: u8) -> CdcHeaders {
    let action = match selector & 0x07 {
        0 => None,
        1 => Some("insert"),
        2 => Some("update"),
        3 => Some("delete"),
        4 => Some(""),
        5 => Some(" UPDATE "),
        _ => Some("merge"),
    };
    let table_name = match selector >> 6 {
        0 => None,
        1 => Some("incident"),
        2 => Some(" "),
        _ => Some("problem"),
    };
    CdcHeaders {
        action: action.map(str::to_owned),
        table_name: table_name.map(str::to_owned),
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, value)) = input.split_first() else {
        return;
    };
    let limits = ParseLimits {
        max_event_bytes: 64 * 1024,
    };
    if let Ok(ticket) = parse_event(value, &headers(selector), limits) {
        // Accepted tickets are fed to classification and summaries: their derived views
        // must be computable without panic too.
        let _ = ticket.is_closed();
        let _ = ticket.log_lines().count();
        let _ = ticket.alarm_lines().count();
        let _ = ticket.people();
    }
});
