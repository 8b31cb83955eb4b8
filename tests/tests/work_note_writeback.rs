//! ServiceNow write-back as the deployed handler assembles it from its settings
//! ([`crate::test_app::spawn_app`]): a technician summary made by `summarize-premium` ends up PATCHed to a local
//! server speaking the Table API shape; a 429's Retry-After is honoured; with the server
//! down the summary is still stored and served, and the `dispatch` tick delivers the note
//! once the server is back. Real Redis, the simulator over HTTP, the real router.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use stormgate_e2e::servicenow_server::{FakeServiceNow, ReceivedNote, SnReply};
use stormgate_e2e::tickets::{event, record};
use stormgate_handlers::config::{ServiceNowSettings, Settings};
use stormgate_handlers::secrets::Secret;
use stormgate_lab::simulator::{DeploymentConfig, Latency, SimulatorConfig};
use stormgate_shared::clock::{EpochMillis, ManualClock};
use stormgate_shared::job::{SummaryKind, Tier};

use crate::test_app::{Llm, TestApp, spawn_app};

const T0: EpochMillis = EpochMillis(1_800_000_000_000);
const USER: &str = "stormgate.integration";
const PASSWORD: &str = "s3cret";

struct Rig {
    servicenow: FakeServiceNow,
    app: TestApp,
    clock: ManualClock,
}

impl Rig {
    async fn start() -> Rig {
        let servicenow = FakeServiceNow::start(USER, PASSWORD).await;
        let mut settings = Settings::example();
        settings.premium.tokens_per_minute = 1_000_000;
        settings.standard.tokens_per_minute = 1_000_000;
        let deployments = [&settings.premium, &settings.standard]
            .iter()
            .map(|t| {
                let mut d = DeploymentConfig::new(t.deployment.as_str(), "gpt-4o", 1_000_000);
                d.latency = Latency {
                    first_token_ms: 5,
                    per_output_token_ms: 0,
                };
                d
            })
            .collect();
        settings.servicenow = Some(ServiceNowSettings {
            instance_url: servicenow.instance_url(),
            username: USER.into(),
            password: Secret::new(PASSWORD),
        });
        let clock = ManualClock::starting_at(T0);
        let app = spawn_app(
            settings,
            Llm::Simulator(SimulatorConfig::new(9, deployments)),
            Arc::new(clock.clone()),
        )
        .await;
        Rig {
            servicenow,
            app,
            clock,
        }
    }

    /// One `dispatch` timer tick; its `ReturnValue`.
    async fn dispatch(&self) -> Value {
        let body = self.app.dispatch().await;
        let messages = body["Outputs"]["premiumQueue"].as_array().cloned();
        for message in messages.unwrap_or_default() {
            let handoff = json!({"Data": {"handoff": message.to_string()}, "Metadata": {"DequeueCount": "1"}});
            let done = self.app.invoke("summarize-premium", handoff).await;
            assert_eq!(done["ReturnValue"]["acked"], 1, "{done}");
        }
        body["ReturnValue"].clone()
    }

    /// A P1 ticket with a technician job, as `classify` stores it.
    async fn ticket(&self, n: u16) -> String {
        let incident = event(n, n, 1);
        let record = record(&incident, &[SummaryKind::Technician], Tier::Premium, T0);
        self.app.store.ingest(&[record]).await.unwrap();
        incident["sys_id"].as_str().unwrap().to_owned()
    }

    /// The technician summary the read API serves for `sys_id`.
    async fn served_technician_summary(&self, sys_id: &str) -> Value {
        self.app.get(&format!("/api/summaries/{sys_id}")).await["summaries"]["technician"].clone()
    }
}

#[tokio::test]
async fn technician_summaries_reach_servicenow_through_429s_and_outages() {
    let mut rig = Rig::start().await;

    // A 429 first: the summary is stored and served, the note waits for Retry-After.
    rig.servicenow.script([SnReply::RateLimited(2)]);
    let first = rig.ticket(1).await;
    let tick = rig.dispatch().await;
    assert_eq!(tick["counters"]["admitted_jobs"], 1, "{tick}");
    let summary = rig.served_technician_summary(&first).await;
    assert_eq!(summary["degraded"], false, "{summary}");
    assert_ne!(summary["model"], "extractive", "{summary}");
    assert_eq!(rig.servicenow.attempts(), 1);
    assert!(rig.servicenow.notes().is_empty());

    rig.clock.advance(Duration::from_secs(1));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 0, "{tick}");
    assert_eq!(
        rig.servicenow.attempts(),
        1,
        "nothing is sent before Retry-After"
    );

    rig.clock.advance(Duration::from_secs(1));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 1, "{tick}");
    let first_note = ReceivedNote {
        sys_id: first.clone(),
        work_notes: summary["text"].as_str().unwrap().to_owned(),
    };
    assert_eq!(rig.servicenow.notes(), std::slice::from_ref(&first_note));

    // ServiceNow down: the summary is stored and served regardless.
    rig.servicenow.stop().await;
    let second = rig.ticket(2).await;
    rig.dispatch().await;
    let summary = rig.served_technician_summary(&second).await;
    assert_eq!(summary["degraded"], false, "{summary}");
    let second_note = ReceivedNote {
        sys_id: second.clone(),
        work_notes: summary["text"].as_str().unwrap().to_owned(),
    };

    // Still down when the note comes due: tried once more, kept for later.
    rig.clock.advance(Duration::from_secs(61));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["queued"], 1, "{tick}");

    // Back up: the note goes out when due again, exactly once.
    rig.servicenow.restart().await;
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 0, "not due yet: {tick}");
    rig.clock.advance(Duration::from_secs(121));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 1, "{tick}");
    assert_eq!(rig.servicenow.notes(), [first_note, second_note]);
    rig.clock.advance(Duration::from_secs(3_600));
    let tick = rig.dispatch().await;
    assert_eq!(tick["work_notes"]["delivered"], 0, "{tick}");
    assert_eq!(rig.servicenow.notes().len(), 2, "no note is sent twice");
}
