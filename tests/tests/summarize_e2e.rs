//! The tier worker end to end: real HTTP to the product's Azure OpenAI simulator
//! (`stormgate simulate`'s server), a real redis-server for the store and the governor's
//! ledger, the real REST client, retry layer, governor, extractive path and scrubber.
//! Waiting happens on a virtual clock, so a 7 s Retry-After costs no wall time; HTTP
//! timeouts are real.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use stormgate_e2e::tickets::{event, record, ticket};
use stormgate_handlers::openai::{AzureOpenAiClient, OpenAiAuth, OpenAiConfig};
use stormgate_lab::simulator::{DeploymentConfig, Faults, HeaderVariant, Latency, SimulatorConfig};
use stormgate_lab::simulator_http::{SimulatorHandle, spawn_simulator};
use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::configured_sinks::Sinks;
use stormgate_shared::governor::{DeploymentBudget, Governor, GovernorPolicy, RedisLedger};
use stormgate_shared::job::JobId;
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::retry::{CallRecord, GiveUp, RetryPolicy};
use stormgate_shared::scrubber::{ScrubContext, find_leaks};
use stormgate_shared::sinks::{CustomerNotice, Owed, claim_notices};
use stormgate_shared::store::redis::RedisStore;
use stormgate_shared::store::{AgingPolicy, Store};
use stormgate_shared::summarize::{
    Deployment, SummarizeOutcome, SummarizeSettings, SummarySource, TierWorker,
};
use stormgate_shared::testing::redis_server::RedisServer;

const DEPLOYMENT: &str = "premium-sim";
const T0: EpochMillis = EpochMillis(1_800_000_000_000);
const HTTP_TIMEOUT: Duration = Duration::from_millis(500);

struct Lab {
    _redis: RedisServer,
    store: RedisStore,
    governor: Governor,
    simulator: SimulatorHandle,
    client: AzureOpenAiClient,
    clock: ManualClock,
    notices: Mutex<Vec<CustomerNotice>>,
}

impl Lab {
    async fn start(faults: Faults) -> Lab {
        let redis = RedisServer::start().expect("start redis-server");
        let store = redis.store("e2e").unwrap();
        let governor = Governor::new(
            Arc::new(RedisLedger::new(redis_connection(&redis).await, "e2e:gov")),
            GovernorPolicy::default(),
            [DeploymentBudget {
                tier: Tier::Premium,
                deployment: DEPLOYMENT.parse().unwrap(),
                tpm: 1_000_000,
                rpm: 6_000,
            }],
        );
        let mut deployment = DeploymentConfig::new(DEPLOYMENT, "gpt-4o-2024-08-06", 1_000_000);
        deployment.latency = Latency {
            first_token_ms: 5,
            per_output_token_ms: 0,
        };
        deployment.faults = faults;
        let mut config = SimulatorConfig::new(7, vec![deployment]);
        config.hang_ms = 2_000;
        let simulator = spawn_simulator(config).await.unwrap();
        let clock = ManualClock::starting_at(T0);
        let client = AzureOpenAiClient::new(
            OpenAiConfig {
                endpoint: simulator.endpoint(),
                api_version: "2024-10-21".into(),
                timeout: HTTP_TIMEOUT,
            },
            OpenAiAuth::ApiKey("simulator-key".into()),
            Arc::new(clock.clone()),
        )
        .unwrap();
        Lab {
            _redis: redis,
            store,
            governor,
            simulator,
            client,
            clock,
            notices: Mutex::default(),
        }
    }

    /// `tickets` tickets in outages of `per_outage`, each with jobs of `kinds`.
    async fn ingest(&self, tickets: u16, per_outage: u16, kinds: &[SummaryKind]) {
        let mut records: Vec<_> = (1..=tickets)
            .map(|n| {
                record(
                    &event(n, n.div_ceil(per_outage), 1),
                    kinds,
                    Tier::Premium,
                    T0,
                )
            })
            .collect();
        // The groups run one after another on one virtual clock: give every job room
        // for its retries, so the bound (not the deadline) is what stops them.
        for job in records.iter_mut().flat_map(|r| r.jobs.iter_mut()) {
            job.deadline = T0.plus(Duration::from_secs(3_600));
        }
        self.store.ingest(&records).await.unwrap();
    }

    fn worker(&self, seed: u64, policy: RetryPolicy) -> TierWorker<'_> {
        TierWorker {
            store: &self.store,
            client: &self.client,
            gate: &self.governor,
            clock: &self.clock,
            deployment: Deployment {
                tier: Tier::Premium,
                name: DEPLOYMENT.parse().unwrap(),
                model: "gpt-4o".into(),
            },
            settings: SummarizeSettings {
                retry: policy,
                ..SummarizeSettings::default()
            },
            rng: Mutex::new(SmallRng::seed_from_u64(seed)),
            related: None,
            sinks: Sinks {
                notices: true,
                work_notes: false,
            },
            holder: format!("e2e-{seed}"),
        }
    }

    /// Leases and summarizes groups until the queue is empty.
    async fn drain(&self, worker: &TierWorker<'_>) -> Vec<(usize, SummarizeOutcome)> {
        let mut outcomes = Vec::new();
        loop {
            let group = self
                .store
                .lease(
                    Tier::Premium,
                    self.clock.now(),
                    Duration::from_secs(600),
                    4,
                    AgingPolicy {
                        promote_every: Duration::from_secs(60),
                    },
                )
                .await
                .unwrap();
            if group.is_empty() {
                return outcomes;
            }
            let outcome = worker.summarize_group(&group, None).await.unwrap();
            // What the tier function publishes for the group: its customer notices.
            let ids: Vec<JobId> = group.iter().map(|l| l.job.id.clone()).collect();
            let notices = claim_notices(&self.store, Owed::jobs(&ids), self.clock.now())
                .await
                .unwrap();
            notices.complete(&self.store).await.unwrap();
            self.notices.lock().unwrap().extend(notices.items);
            outcomes.push((group.len(), outcome));
        }
    }

    /// Every customer notice the drained groups published.
    fn notices(&self) -> Vec<CustomerNotice> {
        self.notices.lock().unwrap().clone()
    }

    async fn lease_one(&self) -> stormgate_shared::store::LeasedGroup {
        self.store
            .lease(
                Tier::Premium,
                self.clock.now(),
                Duration::from_secs(600),
                1,
                AgingPolicy {
                    promote_every: Duration::from_secs(60),
                },
            )
            .await
            .unwrap()
    }

    fn requests(&self) -> u64 {
        self.simulator.core().stats(DEPLOYMENT).unwrap().requests
    }

    /// Every ticket has a summary of `kind` for its current version.
    async fn assert_every_job_has_a_summary(&self, tickets: u16, kind: SummaryKind) {
        for n in 1..=tickets {
            let id = format!("{n:032x}").parse().unwrap();
            let summary = self.store.summary(&id, kind).await.unwrap();
            let summary = summary.unwrap_or_else(|| panic!("ticket {n} has no {kind} summary"));
            assert_eq!(summary.version, 1);
        }
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy::default()
}

fn assert_calls_within_bound(outcomes: &[(usize, SummarizeOutcome)], bound: u32) {
    for (jobs, outcome) in outcomes {
        assert!(
            outcome.calls.len() <= bound as usize,
            "a group of {jobs} made {} calls",
            outcome.calls.len()
        );
        assert_eq!(outcome.acked, *jobs);
    }
}

/// The waits chosen before each retry.
fn retry_waits(outcomes: &[(usize, SummarizeOutcome)]) -> Vec<Duration> {
    outcomes
        .iter()
        .flat_map(|(_, o)| o.calls.iter())
        .filter(|c: &&CallRecord| c.error.is_some() && !c.wait_after.is_zero())
        .map(|c| c.wait_after)
        .collect()
}

/// Retries are spread: mostly distinct waits, no 100 ms slot holding more than a
/// third of them, and a spread of at least `min_spread`.
fn assert_spread(waits: &[Duration], min_spread: Duration) {
    assert!(
        waits.len() >= 8,
        "too few retries to judge: {}",
        waits.len()
    );
    let millis: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
    let distinct: BTreeSet<_> = millis.iter().collect();
    assert!(
        distinct.len() * 10 >= millis.len() * 8,
        "{} distinct of {}",
        distinct.len(),
        millis.len()
    );
    let mut slots = std::collections::BTreeMap::new();
    for m in &millis {
        *slots.entry(m / 100).or_insert(0usize) += 1;
    }
    let fullest = slots.values().max().copied().unwrap_or(0);
    assert!(
        fullest * 3 <= millis.len(),
        "{fullest} of {} retries in one 100 ms slot",
        millis.len()
    );
    let (min, max) = (
        millis.iter().min().copied().unwrap_or(0),
        millis.iter().max().copied().unwrap_or(0),
    );
    assert!(max - min >= min_spread.as_millis(), "spread {}", max - min);
}

#[tokio::test]
async fn success_summarizes_each_coalesced_outage_with_one_call() {
    let lab = Lab::start(Faults::default()).await;
    lab.ingest(8, 4, &[SummaryKind::Technician]).await;
    let outcomes = lab.drain(&lab.worker(1, policy())).await;
    assert_eq!(outcomes.len(), 2, "two outages of four tickets");
    assert_eq!(lab.requests(), 2);
    for (_, o) in &outcomes {
        assert!(o.summaries.values().all(|s| *s == SummarySource::Llm));
    }
    lab.assert_every_job_has_a_summary(8, SummaryKind::Technician)
        .await;
    let id = format!("{:032x}", 3).parse().unwrap();
    let stored = lab
        .store
        .summary(&id, SummaryKind::Technician)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((stored.tier, stored.degraded), (Tier::Premium, false));
    assert_eq!(stored.model, "gpt-4o-2024-08-06");
    assert!(stored.tokens_used.get() > 0);
    assert!(
        stored.text.contains("This ticket: INC0010003"),
        "{}",
        stored.text
    );
}

async fn throttled_storm(headers: HeaderVariant, retry_after_ms: u64) {
    let lab = Lab::start(Faults {
        throttle_rate: 1.0,
        throttle_retry_after_ms: retry_after_ms,
        headers,
        ..Faults::default()
    })
    .await;
    lab.ingest(10, 1, &[SummaryKind::Technician]).await;
    let outcomes = lab.drain(&lab.worker(2, policy())).await;
    assert_eq!(outcomes.len(), 10);
    assert_calls_within_bound(&outcomes, policy().max_attempts);
    assert_eq!(lab.requests(), 10 * u64::from(policy().max_attempts));
    let waits = retry_waits(&outcomes);
    let hint = Duration::from_millis(retry_after_ms);
    assert!(
        waits.iter().all(|w| *w >= hint),
        "a retry came back before the hint"
    );
    assert_spread(&waits, Duration::from_millis(300));
    for (_, o) in &outcomes {
        assert!(matches!(
            o.summaries.values().next(),
            Some(SummarySource::Extractive {
                reason: GiveUp::AttemptsExhausted { .. }
            })
        ));
    }
    // The instant extractive summary stands.
    lab.assert_every_job_has_a_summary(10, SummaryKind::Technician)
        .await;
}

#[tokio::test]
async fn throttled_with_retry_after_only() {
    throttled_storm(HeaderVariant::RetryAfterOnly, 7_000).await;
    cooldown_respected_by_a_second_worker(HeaderVariant::RetryAfterOnly, 7_000).await;
}

#[tokio::test]
async fn throttled_with_retry_after_ms() {
    throttled_storm(HeaderVariant::RetryAfterMsOnly, 1_500).await;
    cooldown_respected_by_a_second_worker(HeaderVariant::RetryAfterMsOnly, 1_500).await;
}

#[tokio::test]
async fn throttled_with_reset_tokens_only() {
    throttled_storm(HeaderVariant::ResetTokensOnly, 6_000).await;
    cooldown_respected_by_a_second_worker(HeaderVariant::ResetTokensOnly, 6_000).await;
}

#[tokio::test]
async fn throttled_with_the_wait_only_in_the_message_text() {
    throttled_storm(HeaderVariant::MessageTextOnly, 9_000).await;
    cooldown_respected_by_a_second_worker(HeaderVariant::MessageTextOnly, 9_000).await;
}

/// Worker A meets one 429 whose wait comes only from `headers` and falls back at once;
/// worker B, at the same instant, must not call before that wait has passed.
async fn cooldown_respected_by_a_second_worker(headers: HeaderVariant, retry_after_ms: u64) {
    let lab = Lab::start(Faults {
        throttle_rate: 1.0,
        throttle_retry_after_ms: retry_after_ms,
        headers,
        ..Faults::default()
    })
    .await;
    lab.ingest(2, 1, &[SummaryKind::Technician]).await;
    let a = lab.worker(
        3,
        RetryPolicy {
            max_attempts: 1,
            ..policy()
        },
    );
    let b = lab.worker(4, policy());
    let start = lab.clock.now();
    let group_a = lab.lease_one().await;
    let out_a = a.summarize_group(&group_a, None).await.unwrap();
    assert_eq!(out_a.calls.len(), 1);
    assert_eq!(lab.clock.now(), start, "A did not wait");
    let group_b = lab.lease_one().await;
    let out_b = b.summarize_group(&group_b, None).await.unwrap();
    let first_b = out_b.calls.first().expect("B called after the cooldown");
    // Whole seconds when the hint is: retry-after, reset-tokens and the message round up.
    let hinted = Duration::from_millis(retry_after_ms);
    assert!(
        first_b.started_at >= start.plus(hinted),
        "{headers:?}: B called {} ms into A's {} ms cooldown",
        first_b.started_at.since(start).as_millis(),
        hinted.as_millis()
    );
    lab.assert_every_job_has_a_summary(2, SummaryKind::Technician)
        .await;
}

#[tokio::test]
async fn a_cooldown_set_by_one_worker_is_respected_by_a_second() {
    cooldown_respected_by_a_second_worker(HeaderVariant::RetryAfterOnly, 20_000).await;
}

#[tokio::test]
async fn a_daily_quota_is_not_waited_out_and_no_worker_calls_again() {
    let lab = Lab::start(Faults {
        daily_quota_exhausted: true,
        ..Faults::default()
    })
    .await;
    lab.ingest(6, 1, &[SummaryKind::Technician]).await;
    let first = lab.drain(&lab.worker(5, policy())).await;
    assert_eq!(
        lab.requests(),
        1,
        "one 429 with 86400 s takes the deployment out"
    );
    // Another worker with work of its own does not call either.
    let more: Vec<_> = (7..=8)
        .map(|n| {
            record(
                &event(n, n, 1),
                &[SummaryKind::Technician],
                Tier::Premium,
                T0,
            )
        })
        .collect();
    lab.store.ingest(&more).await.unwrap();
    let second = lab.drain(&lab.worker(55, policy())).await;
    assert_eq!(second.len(), 2);
    assert_eq!(
        lab.requests(),
        1,
        "the second worker respected the down mark"
    );
    assert_eq!(lab.clock.now(), T0, "nothing waited");
    assert!(first.iter().all(|(_, o)| matches!(
        o.summaries.values().next(),
        Some(SummarySource::Extractive {
            reason: GiveUp::DeploymentDown { .. }
        })
    )));
    lab.assert_every_job_has_a_summary(8, SummaryKind::Technician)
        .await;
}

#[tokio::test]
async fn server_errors_are_retried_within_the_bound_with_jitter() {
    let lab = Lab::start(Faults {
        server_error_rate: 1.0,
        ..Faults::default()
    })
    .await;
    lab.ingest(10, 1, &[SummaryKind::Technician]).await;
    let outcomes = lab.drain(&lab.worker(6, policy())).await;
    assert_calls_within_bound(&outcomes, policy().max_attempts);
    assert_eq!(lab.requests(), 10 * u64::from(policy().max_attempts));
    assert_spread(&retry_waits(&outcomes), Duration::from_millis(300));
    lab.assert_every_job_has_a_summary(10, SummaryKind::Technician)
        .await;
}

#[tokio::test]
async fn timeouts_are_retried_within_the_bound() {
    let lab = Lab::start(Faults {
        timeout_rate: 1.0,
        ..Faults::default()
    })
    .await;
    lab.ingest(3, 1, &[SummaryKind::Technician]).await;
    let outcomes = lab.drain(&lab.worker(7, policy())).await;
    assert_calls_within_bound(&outcomes, policy().max_attempts);
    for (_, o) in &outcomes {
        assert_eq!(o.calls.len(), policy().max_attempts as usize);
        assert!(
            o.calls
                .iter()
                .all(|c| c.error.as_deref() == Some("timed out"))
        );
    }
    assert_spread(&retry_waits(&outcomes), Duration::from_millis(300));
    lab.assert_every_job_has_a_summary(3, SummaryKind::Technician)
        .await;
}

#[tokio::test]
async fn slow_answers_within_the_timeout_still_count() {
    let lab = Lab::start(Faults {
        spike_rate: 1.0,
        spike_ms: 200,
        ..Faults::default()
    })
    .await;
    lab.ingest(3, 1, &[SummaryKind::Technician]).await;
    let outcomes = lab.drain(&lab.worker(8, policy())).await;
    assert_eq!(lab.requests(), 3, "one call per job, none retried");
    assert_calls_within_bound(&outcomes, 1);
    assert!(
        outcomes
            .iter()
            .all(|(_, o)| o.summaries.values().all(|s| *s == SummarySource::Llm))
    );
    lab.assert_every_job_has_a_summary(3, SummaryKind::Technician)
        .await;
}

#[tokio::test]
async fn a_content_filter_verdict_falls_back_after_one_call() {
    let lab = Lab::start(Faults {
        content_filter_rate: 1.0,
        ..Faults::default()
    })
    .await;
    lab.ingest(4, 1, &[SummaryKind::Technician, SummaryKind::Customer])
        .await;
    let outcomes = lab.drain(&lab.worker(9, policy())).await;
    for (_, o) in &outcomes {
        // One call per summary kind in the group, never a retry.
        let kinds = o.summaries.len().min(2);
        assert!(o.calls.len() <= kinds, "{} calls", o.calls.len());
        assert!(o.summaries.values().all(|s| matches!(
            s,
            SummarySource::Extractive {
                reason: GiveUp::ContentFiltered
            }
        )));
    }
    lab.assert_every_job_has_a_summary(4, SummaryKind::Technician)
        .await;
    lab.assert_every_job_has_a_summary(4, SummaryKind::Customer)
        .await;
}

#[tokio::test]
async fn customer_notices_on_the_llm_path_leak_nothing_from_the_tickets() {
    let lab = Lab::start(Faults::default()).await;
    lab.ingest(12, 3, &[SummaryKind::Customer]).await;
    let outcomes = lab.drain(&lab.worker(10, policy())).await;
    let notices = lab.notices();
    assert_eq!(notices.len(), 4, "one notice per outage of three tickets");
    assert_eq!(notices.iter().map(|n| n.tickets.len()).sum::<usize>(), 12);
    assert!(
        outcomes
            .iter()
            .all(|(_, o)| o.summaries.values().all(|s| *s == SummarySource::Llm))
    );
    // A notice speaks for each ticket it names: it leaks nothing of any of them.
    for (notice, named) in notices
        .iter()
        .flat_map(|n| n.tickets.iter().map(move |t| (n, t)))
    {
        let n: u16 = u16::from_str_radix(named.ticket.as_str(), 16).unwrap();
        let ev = event(n, n.div_ceil(3), 1);
        let context = ScrubContext::from_ticket(&ticket(&ev));
        assert_eq!(
            find_leaks(&notice.text, &context),
            vec![],
            "{}",
            notice.text
        );
        for planted in [
            "10.20.",
            "2001:db8",
            ".example.net",
            "noc@",
            "555 01",
            "Jane",
            "Roe",
            "Wei Chen",
            "Pat Smith",
            "ams-agg",
            "NOC Tier 2",
        ] {
            assert!(
                !notice.text.contains(planted),
                "{planted} leaked: {}",
                notice.text
            );
        }
    }
}

/// The project's leak corpus (shared/tests/fixtures/leak_corpus): tickets with the
/// internal details planted in them.
fn leak_corpus() -> Vec<(String, serde_json::Value, Vec<String>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/tests/fixtures/leak_corpus");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let case: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            let planted = case["planted"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            (p.display().to_string(), case["ticket"].clone(), planted)
        })
        .collect();
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(cases.len() >= 4, "leak corpus missing in {}", dir.display());
    cases
}

/// Summarizes every corpus ticket's customer notice with `faults` and checks each
/// notice against what was planted in its ticket; returns the notices' sources.
async fn corpus_notices_leak_nothing(faults: Faults) -> Vec<SummarySource> {
    let lab = Lab::start(faults).await;
    let corpus = leak_corpus();
    let mut records: Vec<_> = corpus
        .iter()
        .map(|(_, ticket, _)| record(ticket, &[SummaryKind::Customer], Tier::Premium, T0))
        .collect();
    for job in records.iter_mut().flat_map(|r| r.jobs.iter_mut()) {
        job.deadline = T0.plus(Duration::from_secs(3_600));
    }
    lab.store.ingest(&records).await.unwrap();
    let outcomes = lab.drain(&lab.worker(12, policy())).await;
    let notices = lab.notices();
    let named: usize = notices.iter().map(|n| n.tickets.len()).sum();
    assert_eq!(named, corpus.len(), "each ticket named by one notice");
    for (name, ticket_json, planted) in &corpus {
        let id = ticket_json["sys_id"].as_str().unwrap();
        let notice = notices
            .iter()
            .find(|n| n.tickets.iter().any(|t| t.ticket.as_str() == id))
            .unwrap_or_else(|| panic!("{name}: no notice"));
        let lower = notice.text.to_lowercase();
        for p in planted {
            assert!(
                !lower.contains(&p.to_lowercase()),
                "{name}: {p:?} leaked in {:?}",
                notice.text
            );
        }
        let context = ScrubContext::from_ticket(&ticket(ticket_json));
        assert_eq!(find_leaks(&notice.text, &context), vec![], "{name}");
    }
    outcomes
        .into_iter()
        .flat_map(|(_, o)| o.summaries.into_values())
        .collect()
}

#[tokio::test]
async fn the_leak_corpus_leaks_nothing_through_the_simulator() {
    let sources = corpus_notices_leak_nothing(Faults::default()).await;
    assert!(
        sources.iter().all(|s| *s == SummarySource::Llm),
        "{sources:?}"
    );
}

#[tokio::test]
async fn the_leak_corpus_leaks_nothing_on_the_extractive_path() {
    let sources = corpus_notices_leak_nothing(Faults {
        content_filter_rate: 1.0,
        ..Faults::default()
    })
    .await;
    assert!(
        sources
            .iter()
            .all(|s| matches!(s, SummarySource::Extractive { .. })),
        "{sources:?}"
    );
}

async fn redis_connection(redis: &RedisServer) -> redis::aio::ConnectionManager {
    let client = redis::Client::open(redis.url()).unwrap();
    redis::aio::ConnectionManager::new(client).await.unwrap()
}
