//! The `summarize-premium` function as the Functions host calls it: a queue-triggered
//! invocation carrying dispatch's hand-off, answered with the customer notices in the
//! Kafka output binding. Real Redis, the simulator over HTTP, the real router on a port
//! ([`crate::test_app::spawn_app`]).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stormgate_e2e::tickets::{event, record};
use stormgate_handlers::config::Settings;
use stormgate_handlers::functions::summarize::NOTIFICATIONS_BINDING;
use stormgate_lab::simulator::{DeploymentConfig, Latency, SimulatorConfig};
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::dispatcher::AdmittedGroup;
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::metering::CallCost;
use stormgate_shared::retry::{Readmission, RetryGate};
use stormgate_shared::store::AgingPolicy;
use stormgate_shared::tokens::Tokens;

use crate::test_app::{Llm, spawn_app};

const T0: EpochMillis = EpochMillis(1_800_000_000_000);

#[tokio::test]
async fn a_handoff_is_summarized_acknowledged_and_notices_go_to_kafka() {
    let mut deployment = DeploymentConfig::new("premium-sim", "gpt-4o-2024-08-06", 1_000_000);
    deployment.latency = Latency {
        first_token_ms: 5,
        per_output_token_ms: 0,
    };
    // The simulator's deployment is the premium tier's.
    let mut settings = Settings::example();
    settings.premium.deployment = "premium-sim".parse().unwrap();
    settings.premium.tokens_per_minute = 1_000_000;
    settings.premium.requests_per_minute = 6_000;
    settings.standard.deployment = "standard-sim".parse().unwrap();
    let clock = ManualClock::starting_at(T0);
    let app = spawn_app(
        settings,
        Llm::Simulator(SimulatorConfig::new(3, vec![deployment])),
        Arc::new(clock.clone()),
    )
    .await;
    let store = app.store.clone();

    let records: Vec<_> = (1..=3)
        .map(|n| record(&event(n, 1, 1), &[SummaryKind::Customer], Tier::Premium, T0))
        .collect();
    store.ingest(&records).await.unwrap();
    let leases = store
        .lease(
            Tier::Premium,
            T0,
            Duration::from_secs(300),
            8,
            AgingPolicy {
                promote_every: Duration::from_secs(60),
            },
        )
        .await
        .unwrap();
    assert_eq!(leases.len(), 3);
    let Readmission::Admitted(reservation) = RetryGate::reserve(
        &app.state.governor,
        &"premium-sim".parse().unwrap(),
        Tokens(3_000),
        T0,
    )
    .await
    else {
        panic!("admitted");
    };
    let handoff = AdmittedGroup {
        tier: Tier::Premium,
        kind: SummaryKind::Customer,
        leases,
        reservation,
        cost: CallCost {
            prompt_tokens: Tokens(2_800),
            max_output_tokens: Tokens(200),
        },
    };

    // The host sends a queue message's JSON as a JSON-encoded string.
    let invocation = json!({
        "Data": {"handoff": serde_json::to_string(&handoff).unwrap()},
        "Metadata": {"DequeueCount": "1"}
    });
    let (status, body) = app.post("/summarize-premium", &invocation).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert_eq!(body["ReturnValue"]["acked"], 3);
    assert_eq!(body["ReturnValue"]["llm_calls"], 1);
    // One outage, one service and place: one notice naming the three tickets.
    let notices = body["Outputs"][NOTIFICATIONS_BINDING].as_array().unwrap();
    assert_eq!(notices.len(), 1, "{notices:?}");
    let named: Vec<&str> = notices[0]["tickets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["number"].as_str().unwrap())
        .collect();
    assert_eq!(named, ["INC0010001", "INC0010002", "INC0010003"]);
    let text = notices[0]["text"].as_str().unwrap();
    assert!(!text.contains("10.20.") && !text.contains("Jane"), "{text}");
    assert_eq!(body["ReturnValue"]["sinks"]["notices"]["tickets"], 3);
    assert_eq!(body["ReturnValue"]["sinks"]["notices"]["waiting"], 0);
    assert_eq!(
        app.simulator()
            .core()
            .stats("premium-sim")
            .unwrap()
            .requests,
        1
    );
    // The call's cost at the premium tier's prices (the example settings: 2.00 / 8.00 USD per
    // million input / output tokens), from the usage the deployment answered.
    let stats = app.simulator().core().stats("premium-sim").unwrap();
    let expected =
        (stats.prompt_tokens as f64 * 2.00 + stats.completion_tokens as f64 * 8.00) / 1_000_000.0;
    let cost = body["ReturnValue"]["cost_usd"].as_f64().unwrap();
    assert!(
        cost > 0.0 && (cost - expected).abs() < 1e-12,
        "{cost} != {expected}"
    );
    for r in &records {
        let stored = store
            .summary(&r.ticket, SummaryKind::Customer)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((stored.tier, stored.degraded), (Tier::Premium, false));
    }
}
