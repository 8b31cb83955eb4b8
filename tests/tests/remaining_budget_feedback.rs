//! What the deployment says it has left feeds the governor: another application spends
//! most of the shared premium deployment's quota, the simulator's
//! `x-ratelimit-remaining-tokens` says so on the first summary, and the next `dispatch`
//! tick admits only what the deployment reported free, deferring the rest that its own
//! window would have admitted. The handler as its binary assembles it, on a real Redis
//! ledger, the simulator over HTTP ([`crate::test_app::spawn_app`]).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use stormgate_e2e::tickets::{event, record};
use stormgate_handlers::config::Settings;
use stormgate_lab::simulator::{DeploymentConfig, Latency, SimulatorConfig};
use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::job::{SummaryKind, Tier};

use crate::test_app::{Llm, spawn_app};

const T0: EpochMillis = EpochMillis(1_800_000_000_000);
const TPM: u64 = 60_000;
/// The other application's share of the premium deployment.
const FOREIGN_TPM: u64 = 57_000;

fn premium_messages(tick: &Value) -> Vec<Value> {
    tick["Outputs"]["premiumQueue"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn real_now() -> EpochMillis {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    EpochMillis(u64::try_from(since.as_millis()).unwrap())
}

#[tokio::test]
async fn a_deployment_reporting_little_left_makes_dispatch_defer_what_its_window_would_admit() {
    let mut settings = Settings::example();
    settings.premium.tokens_per_minute = TPM;
    settings.standard.tokens_per_minute = 1_000_000;
    let premium_name = settings.premium.deployment.to_string();
    let fast = Latency {
        first_token_ms: 5,
        per_output_token_ms: 0,
    };
    let mut premium = DeploymentConfig::new(&premium_name, "gpt-4o", TPM);
    premium.latency = fast;
    premium.faults.foreign_tokens_per_minute = FOREIGN_TPM;
    let mut standard = DeploymentConfig::new(
        settings.standard.deployment.as_str(),
        "gpt-4o-mini",
        1_000_000,
    );
    standard.latency = fast;
    let clock = ManualClock::starting_at(T0);
    let app = spawn_app(
        settings,
        Llm::Simulator(SimulatorConfig::new(4, vec![premium, standard])),
        Arc::new(clock.clone()),
    )
    .await;
    let (store, simulator) = (app.store.clone(), app.simulator());
    let ingest = |numbers: std::ops::RangeInclusive<u16>| {
        numbers
            .map(|n| {
                record(
                    &event(n, n, 1),
                    &[SummaryKind::Technician],
                    Tier::Premium,
                    T0,
                )
            })
            .collect::<Vec<_>>()
    };

    // One summary: its answer says how little the shared deployment has left.
    store.ingest(&ingest(1..=1)).await.unwrap();
    let tick = app.dispatch().await;
    for message in premium_messages(&tick) {
        let handoff = json!({"Data": {"handoff": message.to_string()}, "Metadata": {}});
        let done = app.invoke("summarize-premium", handoff).await;
        assert_eq!(done["ReturnValue"]["llm_calls"], 1, "{done}");
    }
    let stats = simulator.core().stats(&premium_name).unwrap();
    assert_eq!((stats.succeeded, stats.throttled), (1, 0), "{stats:?}");
    let reported = TPM
        - simulator
            .core()
            .tokens_in_window(&premium_name, real_now())
            .unwrap();
    let premium_gauges = |gauges: &[stormgate_shared::governor::DeploymentGauges]| {
        gauges
            .iter()
            .find(|g| g.tier == Tier::Premium)
            .cloned()
            .unwrap()
    };
    let gauges = premium_gauges(&app.state.governor.gauges(clock.now()).await.unwrap());
    assert_eq!(
        gauges.remaining_tokens, reported,
        "the governor's free budget is what the deployment reported: {gauges:?}"
    );
    assert!(gauges.ledger.external.tokens > 0, "{gauges:?}");
    assert_eq!(gauges.ledger.shortfalls, 1);

    // Six more tickets: the window alone would admit them all, the report does not.
    let records = ingest(2..=7);
    let cost: u64 = records
        .iter()
        .flat_map(|r| &r.jobs)
        .map(|j| (j.prompt_tokens + j.max_output_tokens).get())
        .sum();
    let window_free = gauges.limits.tokens - gauges.ledger.window_tokens;
    assert!(
        cost <= window_free && cost > reported,
        "the six cost {cost}: within the window's {window_free} free, beyond the {reported} reported"
    );
    store.ingest(&records).await.unwrap();
    let tick = app.dispatch().await;
    let counters = &tick["ReturnValue"]["counters"];
    let admitted_tokens = counters["admitted_tokens"].as_u64().unwrap();
    assert!(admitted_tokens <= reported, "{counters}");
    assert!(
        counters["admitted_jobs"].as_u64().unwrap() < 6,
        "{counters}"
    );
    assert!(
        counters["released_jobs"].as_u64().unwrap() >= 1,
        "{counters}"
    );
    assert!(counters["deferrals"].as_u64().unwrap() >= 1, "{counters}");

    // Once the window has moved on, the held-back budget is released.
    clock.advance(Duration::from_secs(10));
    let later = app.dispatch().await;
    let admitted_later = later["ReturnValue"]["counters"]["admitted_jobs"]
        .as_u64()
        .unwrap();
    assert_eq!(
        counters["admitted_jobs"].as_u64().unwrap() + admitted_later,
        6,
        "{later}"
    );
}
