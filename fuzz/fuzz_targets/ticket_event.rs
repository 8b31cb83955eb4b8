//! Fuzzes the ticket-event parser and the shared topic's record examination: any Kafka
//! value with any CDC headers yields a ticket, a typed rejection or a skip reason, never a
//! panic; a record the `incident` header claims is never skipped; an accepted ticket keeps
//! its own invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormgate_shared::event::{CdcHeaders, Examined, ParseLimits, examine_event, parse_event};

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
    let headers = headers(selector);
    let examined = examine_event(value, &headers, limits);
    if headers.table_name.as_deref() == Some("incident") {
        assert!(matches!(examined, Examined::Incident(_)), "a claimed incident was skipped");
    }
    if let Ok(ticket) = parse_event(value, &headers, limits) {
        // Accepted tickets are fed to classification and summaries: their derived views
        // must be computable without panic too.
        let _ = ticket.is_closed();
        let _ = ticket.log_lines().count();
        let _ = ticket.alarm_lines().count();
        let _ = ticket.people();
    }
});
