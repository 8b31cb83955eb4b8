//! The catalog of signal lines: every structured event the product logs for operators,
//! with its target and its fields, as the JSON log lines carry them (one object per line,
//! fields flattened: `{"timestamp", "level", "target", "event": "...", <fields>, "span"}`).
//!
//! Azure Monitor sees these lines as Application Insights traces (the Functions host logs a
//! custom handler's stdout under the category `Host.Function.Console`); the alert rules and
//! the workbook in `infra/` read them with `parse_json(message)`. Two tests hold the
//! catalog to the truth: the end-to-end storm test checks every line the real handler
//! logged against it, and the infrastructure test checks that every field an alert or a
//! workbook query names is listed here for its event.

/// One event: its name (the `event` field), the target it is logged under, who logs it,
/// and its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSpec {
    pub event: &'static str,
    pub target: &'static str,
    pub emitted_by: &'static str,
    pub fields: &'static [&'static str],
}

/// Fields of every line, whatever its event.
pub const COMMON_FIELDS: &[&str] = &["timestamp", "level", "target", "event", "span", "message"];

/// The gauges' target.
pub const GAUGES: &str = crate::gauges::TARGET;

pub const EVENTS: &[EventSpec] = &[
    EventSpec {
        event: "queue",
        target: GAUGES,
        emitted_by: "dispatch tick, per LLM tier",
        fields: &[
            "tier",
            "pending",
            "held",
            "leased",
            "oldest_age_ms",
            "p1_pending",
            "p2_pending",
            "p3_pending",
            "p4_pending",
            "p5_pending",
            "p1_oldest_age_ms",
            "p2_oldest_age_ms",
            "p3_oldest_age_ms",
            "p4_oldest_age_ms",
            "p5_oldest_age_ms",
        ],
    },
    EventSpec {
        event: "deployment",
        target: GAUGES,
        emitted_by: "dispatch tick, per deployment",
        fields: &[
            "tier",
            "deployment",
            "window_tokens",
            "window_requests",
            "minute_tokens",
            "remaining_tokens",
            "remaining_requests",
            "limit_tokens",
            "limit_requests",
            "admitted_total",
            "deferred_total",
            "reserved_tokens_total",
            "used_tokens_total",
            "refunded_tokens_total",
            "throttles_total",
            "external_tokens",
            "external_requests",
            "shortfalls_total",
            "cooldown_until_ms",
            "down_until_ms",
        ],
    },
    EventSpec {
        event: "dispatch",
        target: GAUGES,
        emitted_by: "dispatch tick",
        fields: &[
            "started_at_ms",
            "duration_ms",
            "reclaimed",
            "leased_jobs",
            "admitted_calls",
            "admitted_jobs",
            "admitted_tokens",
            "deferrals",
            "cooling_down",
            "waits",
            "waited_ms",
            "released_jobs",
            "shed_jobs",
            "spilled_to_standard",
            "spilled_to_extractive",
            "forced_extractive",
            "paused_tiers",
            "extractive_by_table",
            "moved_down_while_contested",
        ],
    },
    EventSpec {
        event: "retention",
        target: GAUGES,
        emitted_by: "rollup tick",
        fields: &[
            "tickets_purged",
            "more_due",
            "dead_letters",
            "dead_letter_cap",
            "dead_letters_trimmed_total",
        ],
    },
    EventSpec {
        event: "sinks",
        target: "stormgate_handlers::deliveries",
        emitted_by: "dispatch tick and tier functions",
        fields: &[
            "notices_published",
            "notice_tickets",
            "notices_superseded",
            "notices_missing",
            "notices_waiting",
            "work_notes_delivered",
            "work_notes_queued",
            "work_notes_dropped",
            "work_notes_superseded",
            "work_notes_missing",
            "work_notes_waiting",
        ],
    },
    EventSpec {
        event: "ingest",
        target: GAUGES,
        emitted_by: "classify, per successful batch",
        fields: &[
            "events",
            "accepted",
            "duplicate_or_stale",
            "skipped",
            "dead_lettered",
            "unstamped",
        ],
    },
    EventSpec {
        event: "consumer_lag",
        target: GAUGES,
        emitted_by: "classify, per partition of a successful batch",
        fields: &["topic", "partition", "records", "lag_p50_ms", "lag_max_ms"],
    },
    EventSpec {
        event: "severity",
        target: GAUGES,
        emitted_by: "dispatch tick, per severity",
        fields: &[
            "severity",
            "queued",
            "held",
            "in_flight",
            "oldest_age_ms",
            "oldest_allowed_ms",
            "deadline_ms",
            "behind_ms",
        ],
    },
    EventSpec {
        event: "deployment_status",
        target: GAUGES,
        emitted_by: "dispatch tick, per deployment",
        fields: &[
            "tier",
            "deployment",
            "state",
            "down",
            "tpm",
            "rpm",
            "minute_tokens",
            "minute_token_limit",
            "requests_per_minute",
            "throttles_per_minute",
            "throttles_total",
            "spilled_per_minute",
            "prompt_tokens_today",
            "completion_tokens_today",
            "spend_today_usd",
            "paused",
            "extractive_only",
        ],
    },
    EventSpec {
        event: "redis",
        target: GAUGES,
        emitted_by: "dispatch tick",
        fields: &["used_memory", "maxmemory", "used_memory_percent"],
    },
    EventSpec {
        event: "verdict",
        target: GAUGES,
        emitted_by: "dispatch tick",
        fields: &["verdict_level", "verdict_text"],
    },
    EventSpec {
        event: "stored",
        target: GAUGES,
        emitted_by: "tier functions and dispatch, per tier that settled jobs",
        fields: &["tier", "technician", "customer", "rollup"],
    },
    EventSpec {
        event: "control",
        target: GAUGES,
        emitted_by: "every operator action (controls function, stormgate control)",
        fields: &["action", "control_target", "by", "detail", "source"],
    },
];

/// A line known by its message rather than an `event` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageSpec {
    pub message: &'static str,
    pub target: &'static str,
    pub emitted_by: &'static str,
    pub fields: &'static [&'static str],
}

/// The fields of the `span` object every line logged while serving an invocation carries
/// (`app::invocation_span`).
pub const SPAN_FIELDS: &[&str] = &["name", "invocation_id", "method", "path", "status"];

pub const MESSAGES: &[MessageSpec] = &[MessageSpec {
    message: "invocation failed",
    target: "stormgate_handlers::app",
    emitted_by: "every invocation answered 5xx (but 501)",
    fields: &["elapsed_ms"],
}];

/// The spec of a message line, by its message.
pub fn message(text: &str) -> Option<&'static MessageSpec> {
    MESSAGES.iter().find(|m| m.message == text)
}

/// The spec of an event, by name.
pub fn event(name: &str) -> Option<&'static EventSpec> {
    EVENTS.iter().find(|e| e.event == name)
}

/// Whether `field` is one `event`'s lines carry.
pub fn has_field(event_name: &str, field: &str) -> bool {
    COMMON_FIELDS.contains(&field) || event(event_name).is_some_and(|e| e.fields.contains(&field))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_named_once_and_fields_once_each() {
        let mut names: Vec<_> = EVENTS.iter().map(|e| e.event).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EVENTS.len());
        for e in EVENTS {
            let mut fields = e.fields.to_vec();
            fields.sort_unstable();
            fields.dedup();
            assert_eq!(fields.len(), e.fields.len(), "{}", e.event);
            for f in e.fields {
                assert!(
                    !COMMON_FIELDS.contains(f),
                    "{}.{f} shadows a common field",
                    e.event
                );
            }
        }
        assert!(has_field("severity", "behind_ms"));
        assert!(has_field("severity", "level"));
        assert!(!has_field("severity", "behind"));
    }
}
