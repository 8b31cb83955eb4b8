//! Builders for store fixtures: tickets, jobs, summaries and ingest records with
//! plain defaults, so a test states only what it is about.

use crate::clock::EpochMillis;
use crate::job::{Job, JobId, LlmUse, SummaryKind, Tier};
use crate::severity::Severity;
use crate::store::{IngestRecord, SnapshotJson};
use crate::summary::{EXTRACTIVE_MODEL, Summary};
use crate::ticket_id::TicketId;
use crate::tokens::Tokens;

/// The ticket whose sys_id is `n` in hexadecimal.
#[expect(clippy::expect_used, reason = "32 hexadecimal digits always parse")]
pub fn ticket(n: u64) -> TicketId {
    format!("{n:032x}")
        .parse()
        .expect("32 hexadecimal digits are a sys_id")
}

/// A premium job for ticket `n` at `version`, without coalescing key or region.
pub fn job(n: u64, version: u64, kind: SummaryKind, severity: Severity, enqueued_at: u64) -> Job {
    Job {
        id: JobId {
            ticket: ticket(n),
            version,
            kind,
        },
        number: format!("INC{n:07}"),
        severity,
        queue_rank: None,
        llm: LlmUse::Always,
        tier: Tier::Premium,
        prompt_tokens: Tokens(800),
        max_output_tokens: Tokens(200),
        enqueued_at: EpochMillis(enqueued_at),
        deadline: EpochMillis(enqueued_at + 60_000),
        coalesce_key: None,
        region: None,
        hold_until: None,
    }
}

/// A technician job, the most common kind.
pub fn technician_job(n: u64, severity: Severity, enqueued_at: u64) -> Job {
    job(n, 1, SummaryKind::Technician, severity, enqueued_at)
}

/// A summary of ticket `n` at `version` from `tier`.
pub fn summary(n: u64, version: u64, kind: SummaryKind, tier: Tier) -> Summary {
    let model = if tier == Tier::Extractive {
        EXTRACTIVE_MODEL.to_owned()
    } else {
        format!("{tier}-model")
    };
    Summary {
        ticket: ticket(n),
        number: format!("INC{n:07}"),
        version,
        kind,
        text: format!("{kind} summary of version {version} from {tier}"),
        tier,
        model,
        degraded: false,
        tokens_used: Tokens::ZERO,
        created_at: EpochMillis(version * 1_000),
        prompt_version: None,
        input: serde_json::Value::Null,
    }
}

/// An open ticket's record at `version` with its instant extractive summary and `jobs`.
pub fn record(n: u64, version: u64, jobs: Vec<Job>) -> IngestRecord {
    IngestRecord {
        ticket: ticket(n),
        version,
        snapshot: SnapshotJson::from_value(
            &serde_json::json!({ "number": format!("INC{n:07}"), "version": version }),
        ),
        instant_summary: summary(n, version, SummaryKind::Technician, Tier::Extractive),
        jobs,
        closed: false,
        region: None,
    }
}
