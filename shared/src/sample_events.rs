//! Deterministic ServiceNow incident events shaped like a network storm, in the documented
//! event contract (docs/ticket-events.md): for tests, benchmarks and the storm lab.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// A `sys_id` for ticket `n` (32 hex characters).
pub fn sys_id(n: u64) -> String {
    format!(
        "{:032x}",
        0x5707_0000_0000_0000_0000_0000_0000_0000u128 + u128::from(n)
    )
}

/// Alarm log text of roughly `target_bytes`, with storm-style repeats (the same alarms on
/// many ports with changing timestamps and counters) and a few distinct events.
pub fn storm_log(rng: &mut SmallRng, target_bytes: usize) -> String {
    let mut log = String::with_capacity(target_bytes + 128);
    let site = rng.random_range(1..400);
    let mut second = 0u32;
    while log.len() < target_bytes {
        second += rng.random_range(1..4);
        let ts = format!(
            "2026-11-29 {:02}:{:02}:{:02}",
            10 + second / 3600 % 10,
            second / 60 % 60,
            second % 60
        );
        let port = format!(
            "xe-{}/{}/{}",
            rng.random_range(0..4),
            rng.random_range(0..2),
            rng.random_range(0..48)
        );
        let line = match rng.random_range(0..100) {
            0..=34 => format!(
                "{ts} agg-{site:03} LOS alarm on {port} rx power -40.0 dBm seq {}\n",
                rng.random_range(1..99999)
            ),
            35..=59 => format!(
                "{ts} agg-{site:03} LINK DOWN {port} ifIndex {}\n",
                rng.random_range(500..900)
            ),
            60..=74 => format!(
                "{ts} olt-{site:03} DYING GASP from ONT {}\n",
                rng.random_range(1..4096)
            ),
            75..=84 => format!(
                "{ts} pe-{site:03} BGP neighbor 10.{}.{}.1 state Idle\n",
                rng.random_range(0..255),
                rng.random_range(0..255)
            ),
            85..=89 => format!(
                "{ts} site-{site:03} MAINS FAIL rectifier on battery {}%\n",
                rng.random_range(10..99)
            ),
            90..=92 => format!("{ts} agg-{site:03} PSU {} failed\n", rng.random_range(1..3)),
            _ => format!(
                "{ts} agg-{site:03} CPU utilisation {}% on card {}\n",
                rng.random_range(50..99),
                rng.random_range(0..8)
            ),
        };
        log.push_str(&line);
    }
    log
}

/// One storm ticket event (ticket `n`, version `version`) with a log of `log_bytes`.
pub fn storm_event(rng: &mut SmallRng, n: u64, version: u64, log_bytes: usize) -> Value {
    let priority = ["1", "2", "3", "3", "4", "4", "5"][rng.random_range(0..7)];
    let region = ["North", "South", "East", "West"][rng.random_range(0..4)];
    let state = ["1", "2", "2", "3"][rng.random_range(0..4)];
    let customers = rng.random_range(0..3000u32).to_string();
    let parent = if n.is_multiple_of(5) {
        Value::Null
    } else {
        Value::String(format!("INC{:07}", n - n % 5))
    };
    let ci = json!({"display_value": format!("agg-{:03}", n % 40), "value": sys_id(n % 40), "link": "https://example.service-now.com/api/now/cmdb_ci/x"});
    let log = storm_log(rng, log_bytes);
    json!({
        "sys_id": sys_id(n),
        "number": format!("INC{:07}", n),
        "sys_mod_count": version.to_string(),
        "sys_updated_on": "2026-11-29 10:30:00",
        "opened_at": "2026-11-29 10:00:00",
        "priority": priority,
        "impact": {"display_value": "3 - Low", "value": "3"},
        "urgency": "3",
        "state": state,
        "category": "Network",
        "subcategory": "Access",
        "cmdb_ci": ci,
        "u_region": region,
        "assignment_group": {"display_value": "Access Network Ops", "value": "b1"},
        "assigned_to": {"display_value": "Sam Okafor", "value": "u1"},
        "short_description": "Multiple customers down after storm damage",
        "description": "Automated ticket from monitoring. Several ports lost light after high winds.",
        "u_customers_affected": customers,
        "parent_incident": parent,
        "u_alarm_log": log,
        "work_notes": "2026-11-29 10:20:00 - Sam Okafor (Work notes)\nRerouted traffic via backup ring; field team will inspect the duct, ETA 13:00.\n\n",
    })
}

/// A seeded generator for reproducible batches.
pub fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}
