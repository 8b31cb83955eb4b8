//! The `dispatch` function through the router, on a real `redis-server`: the store and the
//! governor's ledger are the production Redis ones, tickets arrive through `classify`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use stormgate_handlers::app::app;
use stormgate_handlers::config::{RedisAuth, RedisSettings, Settings};
use stormgate_handlers::functions::dispatch::{
    NOTIFICATIONS_BINDING, PREMIUM_QUEUE_BINDING, STANDARD_QUEUE_BINDING,
};
use stormgate_handlers::functions::summarize::HANDOFF_BINDING;
use stormgate_handlers::invocation::InvocationRequest;
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::redis_connector::RedisConnector;
use stormgate_handlers::secrets::Secret;
use stormgate_handlers::state::AppState;
use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::dispatcher::AdmittedGroup;
use stormgate_shared::governor::Admission;
use stormgate_shared::job::{SummaryKind, Tier};
use stormgate_shared::store::Store;
use stormgate_shared::summary::EXTRACTIVE_MODEL;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::ticket_id::TicketId;
use stormgate_shared::tokens::Tokens;
use support::{
    incident, kafka_invocation, queue_invocation, queue_messages, sys_id, timer_invocation,
};
use tower::ServiceExt;

const T0: EpochMillis = EpochMillis(1_800_000_000_000);

/// P1/P2 tickets route to premium, P4/P5 to standard (the classifier may only raise).
const TICKETS: &[(u64, &str)] = &[(1, "1"), (2, "1"), (3, "2"), (4, "4"), (5, "5"), (6, "4")];

struct Rig {
    _redis: RedisServer,
    state: AppState,
    clock: ManualClock,
}

impl Rig {
    /// The handler's state as production builds it, over a fresh Redis, with deployments
    /// large enough for every test ticket.
    fn start() -> Rig {
        let redis = RedisServer::start().unwrap();
        let connector = RedisConnector::with_namespace(
            RedisSettings {
                url: Secret::new(redis.url()),
                auth: RedisAuth::Url,
            },
            "dispatch-fn",
        );
        let mut settings = Settings::example();
        settings.premium.tokens_per_minute = 1_000_000;
        settings.standard.tokens_per_minute = 1_000_000;
        // Every job is served on the tick after classify: no coalescing holds here.
        settings.coalesce_hold = Duration::ZERO;
        let clock = ManualClock::starting_at(T0);
        let state = AppState::new(
            settings,
            LazyStore::new(Arc::new(connector)),
            Arc::new(clock.clone()),
        );
        Rig {
            _redis: redis,
            state,
            clock,
        }
    }

    async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let request = Request::post(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = app(self.state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    async fn classify_tickets(&self) {
        let events: Vec<Value> = TICKETS.iter().map(|(n, p)| incident(*n, p)).collect();
        let (status, body) = self.post("/classify", &kafka_invocation(&events)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["ReturnValue"]["accepted"], TICKETS.len(), "{body}");
    }

    async fn dispatch(&self) -> Value {
        let (status, body) = self.post("/dispatch", &timer_invocation()).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    async fn store(&self) -> Arc<dyn Store> {
        self.state.store().await.unwrap()
    }

    /// Pending and leased jobs of both LLM tiers.
    async fn queued(&self) -> (u64, u64) {
        let store = self.store().await;
        let mut total = (0, 0);
        for tier in Tier::LLM {
            let stats = store.queue_stats(tier).await.unwrap();
            total.0 += stats.pending;
            total.1 += stats.leased;
        }
        total
    }

    /// Uses up the current window of both deployments.
    async fn spend_both_budgets(&self) {
        let governor = &self.state.governor;
        for tier in Tier::LLM {
            let deployment = governor.deployment_for(tier).unwrap().clone();
            let limits = governor.limits(&deployment).unwrap();
            let admission = governor
                .admit(&deployment, Tokens(limits.tokens), self.clock.now())
                .await
                .unwrap();
            assert!(matches!(admission, Admission::Admitted(_)), "{admission:?}");
        }
    }
}

/// Decodes a queue message exactly as the tier function does.
fn as_tier_function_input(message: &Value) -> AdmittedGroup {
    assert!(message.is_object(), "queue messages are objects: {message}");
    let invocation = queue_invocation(HANDOFF_BINDING, message).to_string();
    InvocationRequest::from_slice(invocation.as_bytes())
        .unwrap()
        .queue_message(HANDOFF_BINDING)
        .unwrap()
}

fn ticket(n: u64) -> TicketId {
    sys_id(n).parse().unwrap()
}

#[tokio::test]
async fn a_tick_hands_each_tier_its_admitted_groups_as_messages_the_tier_function_decodes() {
    let rig = Rig::start();
    rig.classify_tickets().await;
    let (pending, _) = rig.queued().await;
    assert!(pending >= TICKETS.len() as u64);

    let body = rig.dispatch().await;
    let premium = queue_messages(&body, PREMIUM_QUEUE_BINDING);
    let standard = queue_messages(&body, STANDARD_QUEUE_BINDING);
    assert!(!premium.is_empty() && !standard.is_empty(), "{body}");

    let mut handed_off = 0;
    for (messages, tier) in [(&premium, Tier::Premium), (&standard, Tier::Standard)] {
        for message in messages {
            let group = as_tier_function_input(message);
            assert_eq!(group.tier, tier);
            assert!(!group.leases.is_empty());
            assert!(group.leases.iter().all(|l| l.job.id.kind == group.kind));
            assert_eq!(group.reservation.tokens, group.cost.total());
            handed_off += group.leases.len() as u64;
        }
    }
    assert_eq!(
        handed_off, pending,
        "every queued job is in exactly one message"
    );
    assert_eq!(body["ReturnValue"]["counters"]["admitted_jobs"], pending);
    assert_eq!(body["ReturnValue"]["premium_messages"], premium.len());
    assert_eq!(
        rig.queued().await,
        (0, pending),
        "handed-off jobs stay leased"
    );

    // The next tick finds nothing new to hand out: no duplicates while the leases hold.
    rig.clock.advance(Duration::from_secs(5));
    let again = rig.dispatch().await;
    assert!(queue_messages(&again, PREMIUM_QUEUE_BINDING).is_empty());
    assert!(queue_messages(&again, STANDARD_QUEUE_BINDING).is_empty());
}

#[tokio::test]
async fn a_spent_budget_emits_no_messages_and_keeps_the_jobs_queued() {
    let rig = Rig::start();
    rig.classify_tickets().await;
    let before = rig.queued().await;
    rig.spend_both_budgets().await;

    let body = rig.dispatch().await;
    assert!(
        body["Outputs"].get(PREMIUM_QUEUE_BINDING).is_none(),
        "{body}"
    );
    assert!(
        body["Outputs"].get(STANDARD_QUEUE_BINDING).is_none(),
        "{body}"
    );
    let counters = &body["ReturnValue"]["counters"];
    assert_eq!(counters["admitted_calls"], 0, "{body}");
    assert_eq!(counters["spilled_to_extractive"], 0, "{body}");
    assert!(counters["deferrals"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(rig.queued().await, before, "the jobs wait in their queues");
}

#[tokio::test]
async fn jobs_spilled_to_extractive_end_acknowledged_with_a_stored_degraded_summary_and_their_notices()
 {
    let rig = Rig::start();
    rig.classify_tickets().await;
    let (pending, _) = rig.queued().await;
    // A daily quota on both deployments: nothing can be admitted before any deadline.
    for tier in Tier::LLM {
        let deployment = rig.state.governor.deployment_for(tier).unwrap().clone();
        rig.state
            .governor
            .report_throttle(&deployment, Duration::from_secs(86_400), rig.clock.now())
            .await
            .unwrap();
    }

    let body = rig.dispatch().await;
    assert!(queue_messages(&body, PREMIUM_QUEUE_BINDING).is_empty());
    assert!(queue_messages(&body, STANDARD_QUEUE_BINDING).is_empty());
    assert_eq!(
        body["ReturnValue"]["extractive"]["summarized"], pending,
        "{body}"
    );
    assert_eq!(
        rig.queued().await,
        (0, 0),
        "every spilled job is acknowledged"
    );

    let store = rig.store().await;
    let mut customer_settled = std::collections::BTreeSet::new();
    for (n, _) in TICKETS {
        let technician = store
            .summary(&ticket(*n), SummaryKind::Technician)
            .await
            .unwrap()
            .expect("a technician summary");
        assert!(technician.degraded, "ticket {n}: {technician:?}");
        assert_eq!(technician.tier, Tier::Extractive);
        assert_eq!(technician.model, EXTRACTIVE_MODEL);
        if let Some(customer) = store
            .summary(&ticket(*n), SummaryKind::Customer)
            .await
            .unwrap()
        {
            assert!(customer.degraded);
            customer_settled.insert(sys_id(*n));
        }
    }
    assert!(
        !customer_settled.is_empty(),
        "the storm's P1s are customer-impacting"
    );

    // Their customer notices leave with the tick, each ticket named once.
    let notices = body["Outputs"][NOTIFICATIONS_BINDING].as_array().unwrap();
    let mut named = std::collections::BTreeSet::new();
    for notice in notices {
        for t in notice["tickets"].as_array().unwrap() {
            assert!(
                named.insert(t["ticket"].as_str().unwrap().to_owned()),
                "{notice}"
            );
        }
    }
    assert_eq!(named, customer_settled, "{body}");
    let sinks = &body["ReturnValue"]["sinks"];
    assert_eq!(sinks["notices"]["published"], notices.len(), "{body}");
    assert_eq!(
        sinks["notices"]["tickets"],
        customer_settled.len(),
        "{body}"
    );
    assert_eq!(sinks["notices"]["waiting"], 0, "{body}");
    assert_eq!(
        sinks["work_notes"]["waiting"], 0,
        "write-back is off: {body}"
    );
}

#[tokio::test]
async fn an_unreachable_redis_fails_the_tick_with_503_and_no_details() {
    let port = RedisServer::free_port().unwrap();
    let connector = RedisConnector::with_namespace(
        RedisSettings {
            url: Secret::new(format!("redis://:hunter2@127.0.0.1:{port}/")),
            auth: RedisAuth::Url,
        },
        "dispatch-fn",
    );
    let state = AppState::new(
        Settings::example(),
        LazyStore::new(Arc::new(connector)),
        Arc::new(ManualClock::starting_at(T0)),
    );
    let request = Request::post("/dispatch")
        .header("content-type", "application/json")
        .body(Body::from(timer_invocation().to_string()))
        .unwrap();
    let response = app(state).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains("hunter2") && !text.contains("Outputs"),
        "{text}"
    );
}
