//! Executive regional roll-ups, built from the tickets' stored summaries.
//!
//! Per region: counts by severity and by state (computed here, never by the model),
//! the major outages (P1/P2) with their latest technician summaries, and the trend
//! against the previous roll-up. The LLM writes the prose when the governor admits the
//! call promptly; otherwise, or when the call fails, an extractive roll-up of the same
//! facts is stored. A roll-up is stored under the region's own key ([`RegionKey`]) as a
//! [`RegionRollup`] whose version is its creation time, so the newest always wins.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::job::SummaryKind;
use crate::llm::LlmClient;
use crate::metering;
use crate::prompts;
use crate::region_key::RegionKey;
use crate::region_rollup::RegionRollup;
use crate::retry::{RetryEnv, RetryGate, RetryPolicy, complete_with_retry};
use crate::severity::Severity;
use crate::snapshot::{SnapshotLoad, TicketSnapshot};
use crate::store::{Store, StoreError};
use crate::summarize::Deployment;
use crate::summary::Summary;
use crate::ticket_id::TicketId;

/// Major outages listed per roll-up, most severe first.
const MAJOR_OUTAGES_LISTED: usize = 8;

/// The facts of a region, computed from its tickets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionFacts {
    pub region: String,
    pub open: u64,
    /// P1..P5 counts of open tickets.
    pub by_severity: [u64; 5],
    pub by_state: BTreeMap<String, u64>,
    /// `(number, severity, latest technician summary)` of open P1/P2 tickets.
    pub major: Vec<(String, Severity, String)>,
    /// Open tickets at the previous roll-up, when there was one.
    pub previous_open: Option<u64>,
}

impl RegionFacts {
    /// Counts `tickets` (with their latest technician summaries).
    pub fn gather(
        region: &str,
        tickets: &[(TicketSnapshot, Option<Summary>)],
        previous: Option<&RegionRollup>,
    ) -> RegionFacts {
        let mut facts = RegionFacts {
            region: region.to_owned(),
            previous_open: previous.and_then(|p| p.facts.get("open")?.as_u64()),
            ..RegionFacts::default()
        };
        for (snapshot, summary) in tickets {
            let ticket = &snapshot.ticket;
            *facts
                .by_state
                .entry(ticket.state.as_str().to_owned())
                .or_default() += 1;
            if ticket.is_closed() {
                continue;
            }
            facts.open += 1;
            let severity = snapshot.routing;
            if let Some(slot) = facts.by_severity.get_mut(severity.index()) {
                *slot += 1;
            }
            if severity <= Severity::P2 {
                let text = summary
                    .as_ref()
                    .map(|s| s.text.clone())
                    .unwrap_or_else(|| ticket.short_description.clone());
                facts.major.push((ticket.number.clone(), severity, text));
            }
        }
        facts
            .major
            .sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        facts.major.truncate(MAJOR_OUTAGES_LISTED);
        facts
    }

    /// Rising, falling or steady against the previous roll-up.
    pub fn trend(&self) -> &'static str {
        match self.previous_open {
            None => "first report",
            Some(p) if self.open > p => "rising",
            Some(p) if self.open < p => "falling",
            Some(_) => "steady",
        }
    }

    /// The trusted facts as prompt text (counts only; no ticket text).
    pub fn as_prompt_facts(&self) -> String {
        let mut out = format!(
            "Open tickets: {} (trend: {})\nBy severity:",
            self.open,
            self.trend()
        );
        for severity in Severity::ALL {
            let n = self.by_severity.get(severity.index()).copied().unwrap_or(0);
            let _ = write!(out, " {severity}={n}");
        }
        out.push_str("\nBy state:");
        for (state, n) in &self.by_state {
            let _ = write!(out, " {state}={n}");
        }
        out
    }

    /// The roll-up without a model: the same facts as plain sentences.
    pub fn extractive(&self) -> String {
        let mut out = format!(
            "{}: {} open tickets ({}). {}",
            self.region,
            self.open,
            self.trend(),
            self.as_prompt_facts()
                .lines()
                .skip(1)
                .collect::<Vec<_>>()
                .join("; ")
        );
        out.push('.');
        if self.major.is_empty() {
            out.push_str(" No major outages.");
        } else {
            let _ = write!(out, " Major outages ({}):", self.major.len());
            for (number, severity, text) in &self.major {
                let first = prompts::at_most_sentences(text, 1);
                let _ = write!(out, " {number} {severity}: {first}");
            }
        }
        out
    }
}

/// Builds and stores regional roll-ups.
#[derive(Debug)]
pub struct RollupWorker<'a> {
    pub store: &'a dyn Store,
    pub client: &'a dyn LlmClient,
    pub gate: &'a dyn RetryGate,
    pub clock: &'a dyn Clock,
    pub deployment: Deployment,
    /// Roll-ups are worth a short wait for budget, not a long one.
    pub admission_wait: Duration,
    pub retry: RetryPolicy,
    pub rng: Mutex<SmallRng>,
}

/// Whether a roll-up came from the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RollupOutcome {
    pub rollup: RegionRollup,
    pub llm_calls: usize,
}

impl RollupWorker<'_> {
    /// Rolls up `region` from `tickets` (the region's recent tickets) and stores it.
    pub async fn rollup_region(
        &self,
        region: &str,
        tickets: &[TicketId],
    ) -> Result<RollupOutcome, StoreError> {
        let key = RegionKey::of(region);
        let previous = self.store.rollup(&key).await?;
        let mut loaded = Vec::with_capacity(tickets.len());
        for id in tickets {
            let snapshot = match self.store.load_snapshot(id, None).await? {
                SnapshotLoad::Current { snapshot, .. } => *snapshot,
                SnapshotLoad::Unreadable { reason, .. } => {
                    tracing::error!(ticket = %id, error = %reason, "unreadable snapshot left out of the roll-up");
                    continue;
                }
                SnapshotLoad::Missing | SnapshotLoad::Superseded { .. } => continue,
            };
            let summary = self.store.summary(id, SummaryKind::Technician).await?;
            loaded.push((snapshot, summary));
        }
        let facts = RegionFacts::gather(region, &loaded, previous.as_ref());
        let template = &prompts::ROLLUP_V1;
        let summaries: Vec<String> = facts
            .major
            .iter()
            .map(|(number, severity, text)| format!("{number} {severity}: {text}"))
            .collect();
        let request = prompts::rollup_request(
            template,
            self.deployment.name.as_str(),
            region,
            &facts.as_prompt_facts(),
            &summaries,
        );
        // The limiter's arrival estimate, as every other admission charges its call.
        let cost = metering::request_arrival_charge(&request);
        let seed = self
            .rng
            .lock()
            .map(|mut r| r.random::<u64>())
            .unwrap_or_default();
        let mut rng = SmallRng::seed_from_u64(seed);
        let env = RetryEnv {
            client: self.client,
            gate: self.gate,
            clock: self.clock,
            policy: &self.retry,
            deployment: &self.deployment.name,
            deadline: self.clock.now().plus(self.admission_wait),
        };
        let retried = complete_with_retry(env, request, None, cost, None, &mut rng).await;
        let now = self.clock.now();
        let rollup = match retried.result {
            Ok(c) => RegionRollup::llm(
                key,
                now,
                c.text.trim().to_owned(),
                self.deployment.tier,
                &c.model,
                c.usage.total(),
                template.id,
            ),
            Err(reason) => {
                tracing::info!(%region, ?reason, "regional roll-up falls back to extractive");
                RegionRollup::fallback(key, now, facts.extractive())
            }
        }
        .with_facts(serde_json::json!({
            "region": region,
            "open": facts.open,
            "by_severity": facts.by_severity,
            "by_state": facts.by_state,
            "trend": facts.trend(),
        }));
        self.store.put_rollup(&rollup).await?;
        Ok(RollupOutcome {
            rollup,
            llm_calls: retried.calls.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::{EpochMillis, ManualClock};
    use crate::governor::{DeploymentBudget, Governor, GovernorPolicy, MemoryLedger};
    use crate::job::Tier;
    use crate::llm::{Completion, RateLimitView, Usage};
    use crate::store::IngestRecord;
    use crate::store::memory::MemoryStore;
    use crate::testing::scripted_llm::ScriptedLlm;

    use crate::testing::ingested::{event, record};

    const T0: EpochMillis = EpochMillis(1_800_000_000_000);

    fn ticket(n: u8, priority: &str, state: &str) -> (TicketId, IngestRecord) {
        let record = record(&event(n, 1, priority, state), &[]);
        (record.ticket.clone(), record)
    }

    async fn rig(tpm: u64) -> (MemoryStore, Governor, Vec<TicketId>) {
        let store = MemoryStore::new();
        let tickets = [
            ticket(1, "1", "2"),
            ticket(2, "2", "1"),
            ticket(3, "4", "2"),
            ticket(4, "1", "6"),
        ];
        let records: Vec<IngestRecord> = tickets.iter().map(|(_, r)| r.clone()).collect();
        store.ingest(&records).await.unwrap();
        let governor = Governor::new(
            Arc::new(MemoryLedger::new()),
            GovernorPolicy::default(),
            [DeploymentBudget {
                tier: Tier::Standard,
                deployment: "standard".parse().unwrap(),
                tpm,
                rpm: tpm * 6 / 1_000,
            }],
        );
        (
            store,
            governor,
            tickets.into_iter().map(|(id, _)| id).collect(),
        )
    }

    fn worker<'a>(
        store: &'a MemoryStore,
        governor: &'a Governor,
        client: &'a ScriptedLlm,
        clock: &'a ManualClock,
    ) -> RollupWorker<'a> {
        RollupWorker {
            store,
            client,
            gate: governor,
            clock,
            deployment: Deployment {
                tier: Tier::Standard,
                name: "standard".parse().unwrap(),
                model: "gpt-4o-mini".into(),
            },
            admission_wait: Duration::from_secs(20),
            retry: RetryPolicy {
                max_attempts: 2,
                ..RetryPolicy::default()
            },
            rng: Mutex::new(SmallRng::seed_from_u64(5)),
        }
    }

    #[tokio::test]
    async fn the_model_writes_the_prose_and_the_counts_come_from_the_tickets() {
        let (store, governor, ids) = rig(100_000).await;
        let clock = ManualClock::starting_at(T0);
        let client = ScriptedLlm::new([Ok(Completion {
            text: "North: two major outages, rising.".into(),
            model: "gpt-4o-mini-2024-07-18".into(),
            usage: Usage {
                prompt_tokens: 300,
                completion_tokens: 40,
                total_tokens: 340,
            },
            rate_limit: RateLimitView::default(),
        })]);
        let outcome = worker(&store, &governor, &client, &clock)
            .rollup_region("north", &ids)
            .await
            .unwrap();
        assert_eq!(outcome.llm_calls, 1);
        let stored = store
            .rollup(&RegionKey::of("North "))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.text, "North: two major outages, rising.");
        assert_eq!(stored.prompt_version.as_deref(), Some("rollup/v1"));
        assert_eq!(stored.facts["open"], 3);
        assert_eq!(
            stored.facts["by_severity"],
            serde_json::json!([3, 0, 0, 0, 0]),
            "the classifier routes every fibre cut up to P1"
        );
        let prompt = &client.requests()[0].messages[1].content;
        assert!(prompt.contains("Open tickets: 3"));
        assert!(prompt.contains("INC0010001 P1: INC0010001"), "{prompt}");
        assert!(
            !prompt.contains("INC0010004"),
            "resolved tickets are not major outages"
        );
    }

    #[tokio::test]
    async fn without_budget_the_rollup_is_extractive_and_says_so() {
        // 1,000 TPM: a roll-up call can never fit the short window.
        let (store, governor, ids) = rig(1_000).await;
        let clock = ManualClock::starting_at(T0);
        let client = ScriptedLlm::new([]);
        let outcome = worker(&store, &governor, &client, &clock)
            .rollup_region("north", &ids)
            .await
            .unwrap();
        assert_eq!(client.calls(), 0);
        assert_eq!(outcome.rollup.tier, Tier::Extractive);
        assert!(outcome.rollup.degraded);
        assert!(
            outcome
                .rollup
                .text
                .starts_with("north: 3 open tickets (first report).")
        );
        assert!(
            outcome.rollup.text.contains("INC0010001 P1:"),
            "{}",
            outcome.rollup.text
        );

        // The next roll-up sees the trend against this one.
        clock.advance(Duration::from_secs(60));
        let next = worker(&store, &governor, &client, &clock)
            .rollup_region("north", &ids[..2])
            .await
            .unwrap();
        assert!(
            next.rollup.text.contains("(falling)"),
            "{}",
            next.rollup.text
        );
    }
}
