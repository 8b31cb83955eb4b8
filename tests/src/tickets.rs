//! ServiceNow incident events as Stream Connect publishes them, and the records
//! `classify` stores for them (through the real parser, classifier and ingest).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};
use stormgate_shared::ingest::{IngestContext, IngestPolicy, prepare};
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::store::IngestRecord;
use stormgate_shared::store::memory::MemoryStore;
use stormgate_shared::ticket::Ticket;

/// One incident of a fibre-cut storm. `outage` groups tickets into one coalesced call.
/// The text deliberately carries what must never reach customers: device names and
/// FQDNs, IP addresses, an e-mail address, a phone number, the assignee and caller.
pub fn event(n: u16, outage: u16, version: u64) -> serde_json::Value {
    serde_json::json!({
        "sys_id": format!("{n:032x}"),
        "number": format!("INC{:07}", 10_000 + u32::from(n)),
        "sys_mod_count": version.to_string(),
        "state": "2",
        "priority": "1",
        "category": "network",
        "subcategory": "fibre",
        "cmdb_ci": format!("ams-agg-{n:03}"),
        "location": "Amsterdam DC2",
        "u_region": "north",
        "assignment_group": "NOC Tier 2",
        "assigned_to": "Jane Roe",
        "caller_id": "Pat Smith",
        "parent_incident": format!("INC{:07}", 9_000 + u32::from(outage)),
        "opened_at": "2027-01-15 08:00:00",
        "sys_updated_on": "2027-01-15 08:30:00",
        "short_description": format!("Site {n} down after fibre cut"),
        "description": "Aggregation router lost both uplinks; customers report no service.",
        "work_notes": format!(
            "2027-01-15 08:20:00 - Wei Chen (Work notes)\nFibre cut confirmed near core{n}.ams.example.net; \
             BGP to 10.20.{n}.1 down; call field lead +31 20 555 01{:02} or noc@ops.example.net.\n\n",
            n % 100
        ),
        "u_alarm_log": format!(
            "LINK DOWN ams-agg-{n:03} xe-0/0/1 loss of light\nLINK DOWN ams-agg-{n:03} xe-0/0/1 loss of light\n\
             BGP peer 10.20.{n}.1 down on core{n}.ams.example.net\n2001:db8::{n:x} unreachable"
        ),
        "u_customers_affected": "1200"
    })
}

pub fn ticket(event: &serde_json::Value) -> Ticket {
    parse_event(
        event.to_string().as_bytes(),
        &CdcHeaders::default(),
        ParseLimits::default(),
    )
    .unwrap()
}

/// The record `classify` would store, keeping only jobs of `kinds`, all on `tier`, none
/// of them on a coalescing hold (the tests using it lease at once; holds have their own).
pub fn record(
    event: &serde_json::Value,
    kinds: &[SummaryKind],
    tier: Tier,
    now: EpochMillis,
) -> IngestRecord {
    let store = MemoryStore::new();
    let clock = ManualClock::starting_at(now);
    let classifier = Classifier::embedded().unwrap();
    let policy = IngestPolicy {
        coalesce_hold: std::time::Duration::ZERO,
        ..IngestPolicy::default()
    };
    let ctx = IngestContext {
        store: &store,
        clock: &clock,
        classifier: &classifier,
        policy: &policy,
    };
    let mut record = prepare(ticket(event), &ctx, now).unwrap();
    record.jobs.retain(|j| kinds.contains(&j.id.kind));
    for job in &mut record.jobs {
        job.tier = tier;
    }
    record
}
