//! The ledger rules, run unchanged against the in-memory ledger and the Redis ledger
//! (a real `redis-server` started by each test).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use stormgate_shared::clock::EpochMillis;
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::governor::{
    Admission, DeploymentBudget, ExternalUsage, Governor, GovernorPolicy, Ledger, MemoryLedger,
    Reconciliation, RedisLedger, ReportedRemaining, Reservation, Throttle, ThrottleKind,
    WindowLimits,
};
use stormgate_shared::job::Tier;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::tokens::Tokens;

const T0: EpochMillis = EpochMillis(1_800_000_000_000);
const LIMITS: WindowLimits = WindowLimits {
    window_ms: 10_000,
    tokens: 1_000,
    requests: 3,
    minute_tokens: 6_000,
    send_requests: 1,
};

/// A deployment whose minute, not its short window, is the binding limit.
const MINUTE_BOUND: WindowLimits = WindowLimits {
    window_ms: 10_000,
    tokens: 1_000,
    requests: 100,
    minute_tokens: 2_500,
    send_requests: 100,
};

fn dep() -> DeploymentName {
    "gpt-4o-premium".parse().unwrap()
}

fn at(ms: u64) -> EpochMillis {
    EpochMillis(T0.0 + ms)
}

async fn admit(ledger: &dyn Ledger, cost: u64, now: EpochMillis) -> Admission {
    ledger
        .admit(&dep(), &LIMITS, Tokens(cost), now)
        .await
        .unwrap()
}

async fn send(
    ledger: &dyn Ledger,
    cost: u64,
    replacing: Option<&Reservation>,
    now: EpochMillis,
) -> Admission {
    ledger
        .admit_send(&dep(), &LIMITS, Tokens(cost), replacing.map(|r| r.id), now)
        .await
        .unwrap()
}

fn reservation(a: Admission) -> Reservation {
    match a {
        Admission::Admitted(r) => r,
        other => panic!("expected an admission, got {other:?}"),
    }
}

async fn admits_within_window_and_defers_when_tokens_are_spent(ledger: Arc<dyn Ledger>) {
    let first = reservation(admit(&*ledger, 600, at(0)).await);
    assert_eq!(first.tokens, Tokens(600));
    assert_eq!(first.admitted_at, at(0));
    assert_eq!(
        admit(&*ledger, 500, at(1_000)).await,
        Admission::Deferred {
            retry_at: at(10_000)
        }
    );
    assert_eq!(
        admit(&*ledger, 500, at(9_999)).await,
        Admission::Deferred {
            retry_at: at(10_000)
        }
    );
    let later = reservation(admit(&*ledger, 500, at(10_000)).await);
    assert!(later.id != first.id);
}

async fn defers_when_request_count_is_spent(ledger: Arc<dyn Ledger>) {
    for i in 0..3 {
        reservation(admit(&*ledger, 10, at(i * 1_000)).await);
    }
    // The fourth call must wait until the first of the three leaves the window.
    assert_eq!(
        admit(&*ledger, 10, at(3_000)).await,
        Admission::Deferred {
            retry_at: at(10_000)
        }
    );
    reservation(admit(&*ledger, 10, at(10_000)).await);
    assert_eq!(
        admit(&*ledger, 10, at(10_500)).await,
        Admission::Deferred {
            retry_at: at(11_000)
        }
    );
}

async fn deferral_waits_for_as_many_old_entries_as_needed(ledger: Arc<dyn Ledger>) {
    reservation(admit(&*ledger, 300, at(0)).await);
    reservation(admit(&*ledger, 300, at(2_000)).await);
    reservation(admit(&*ledger, 300, at(4_000)).await);
    // 900 charged; 650 more needs the first two gone (only 100 free now, 400 at 10 s).
    assert_eq!(
        admit(&*ledger, 650, at(5_000)).await,
        Admission::Deferred {
            retry_at: at(12_000)
        }
    );
}

async fn refund_of_unused_tokens_makes_room(ledger: Arc<dyn Ledger>) {
    let r = reservation(admit(&*ledger, 900, at(0)).await);
    assert!(matches!(
        admit(&*ledger, 600, at(100)).await,
        Admission::Deferred { .. }
    ));
    assert_eq!(
        ledger.reconcile(&r, Tokens(300)).await.unwrap(),
        Reconciliation::Refunded(Tokens(600))
    );
    reservation(admit(&*ledger, 600, at(200)).await);
    let snap = ledger.snapshot(&dep(), &LIMITS, at(300)).await.unwrap();
    assert_eq!(snap.window_tokens, 900);
    assert_eq!(snap.window_requests, 2);
    assert_eq!(snap.refunded_tokens, 600);
    assert_eq!(snap.used_tokens, 300);
    assert_eq!(snap.reserved_tokens, 1_500);
    assert_eq!(snap.admitted, 2);
    assert_eq!(snap.deferred, 1);
}

async fn reconciling_twice_or_after_expiry_changes_nothing(ledger: Arc<dyn Ledger>) {
    let r = reservation(admit(&*ledger, 500, at(0)).await);
    assert_eq!(
        ledger.reconcile(&r, Tokens(100)).await.unwrap(),
        Reconciliation::Refunded(Tokens(400))
    );
    assert_eq!(
        ledger.reconcile(&r, Tokens(0)).await.unwrap(),
        Reconciliation::Settled
    );
    let snap = ledger.snapshot(&dep(), &LIMITS, at(1)).await.unwrap();
    assert_eq!(snap.window_tokens, 100);

    let old = reservation(admit(&*ledger, 500, at(1_000)).await);
    let snap = ledger.snapshot(&dep(), &LIMITS, at(20_000)).await.unwrap();
    assert_eq!(snap.window_tokens, 0);
    assert_eq!(snap.minute_tokens, 600, "still in the minute's log");
    let snap = ledger.snapshot(&dep(), &LIMITS, at(70_000)).await.unwrap();
    assert_eq!(snap.minute_tokens, 0);
    assert_eq!(
        ledger.reconcile(&old, Tokens(10)).await.unwrap(),
        Reconciliation::Settled
    );
    let snap = ledger.snapshot(&dep(), &LIMITS, at(70_000)).await.unwrap();
    assert_eq!(
        (snap.window_tokens, snap.minute_tokens),
        (0, 0),
        "an expired reservation must not touch the new windows"
    );
}

async fn defers_until_the_minute_has_room_though_the_short_window_has(ledger: Arc<dyn Ledger>) {
    let admit_minute = |cost: u64, ms: u64| {
        let ledger = ledger.clone();
        async move {
            ledger
                .admit(&dep(), &MINUTE_BOUND, Tokens(cost), at(ms))
                .await
                .unwrap()
        }
    };
    reservation(admit_minute(1_000, 0).await);
    reservation(admit_minute(1_000, 15_000).await);
    // The short window (10 s) is empty at 30 s, but the minute holds 2,000 of 2,500.
    assert_eq!(
        admit_minute(1_000, 30_000).await,
        Admission::Deferred {
            retry_at: at(60_000)
        }
    );
    reservation(admit_minute(500, 30_000).await);
    let r = reservation(admit_minute(1_000, 60_000).await);
    assert_eq!(r.admitted_at, at(60_000));
    let snap = ledger
        .snapshot(&dep(), &MINUTE_BOUND, at(60_000))
        .await
        .unwrap();
    assert_eq!((snap.minute_tokens, snap.window_tokens), (2_500, 1_000));
}

async fn overrun_is_charged_to_the_window(ledger: Arc<dyn Ledger>) {
    let r = reservation(admit(&*ledger, 400, at(0)).await);
    assert_eq!(
        ledger.reconcile(&r, Tokens(700)).await.unwrap(),
        Reconciliation::Overran(Tokens(300))
    );
    assert_eq!(
        admit(&*ledger, 400, at(10)).await,
        Admission::Deferred {
            retry_at: at(10_000)
        }
    );
}

async fn cooldown_is_respected_and_never_shortened(ledger: Arc<dyn Ledger>) {
    let until = ledger
        .throttle(&dep(), ThrottleKind::CoolingDown, at(5_000))
        .await
        .unwrap();
    assert_eq!(until, at(5_000));
    let until = ledger
        .throttle(&dep(), ThrottleKind::CoolingDown, at(3_000))
        .await
        .unwrap();
    assert_eq!(until, at(5_000));
    assert_eq!(
        admit(&*ledger, 10, at(1_000)).await,
        Admission::CoolingDown { until: at(5_000) }
    );
    reservation(admit(&*ledger, 10, at(5_000)).await);
    let snap = ledger.snapshot(&dep(), &LIMITS, at(4_000)).await.unwrap();
    assert_eq!(
        snap.cooldown_until, None,
        "the ledger's timeline already passed the cooldown"
    );
    assert_eq!(snap.throttles, 2);
}

async fn down_deployment_answers_down_before_anything_else(ledger: Arc<dyn Ledger>) {
    ledger
        .throttle(&dep(), ThrottleKind::CoolingDown, at(1_000))
        .await
        .unwrap();
    ledger
        .throttle(&dep(), ThrottleKind::Down, at(86_400_000))
        .await
        .unwrap();
    assert_eq!(
        admit(&*ledger, 10, at(500)).await,
        Admission::Down {
            until: at(86_400_000)
        }
    );
    let snap = ledger.snapshot(&dep(), &LIMITS, at(600)).await.unwrap();
    assert_eq!(snap.down_until, Some(at(86_400_000)));
    assert_eq!(snap.cooldown_until, Some(at(1_000)));
}

async fn lagging_clock_cannot_reopen_a_closed_window(ledger: Arc<dyn Ledger>) {
    reservation(admit(&*ledger, 900, at(20_000)).await);
    // A caller whose clock lags 15 s is placed on the ledger's timeline.
    assert_eq!(
        admit(&*ledger, 200, at(5_000)).await,
        Admission::Deferred {
            retry_at: at(30_000)
        }
    );
    let r = reservation(admit(&*ledger, 100, at(5_000)).await);
    assert_eq!(r.admitted_at, at(20_000));
}

async fn deployments_have_separate_budgets(ledger: Arc<dyn Ledger>) {
    let other: DeploymentName = "gpt-4o-mini-standard".parse().unwrap();
    reservation(admit(&*ledger, 1_000, at(0)).await);
    let a = ledger
        .admit(&other, &LIMITS, Tokens(1_000), at(0))
        .await
        .unwrap();
    assert!(matches!(a, Admission::Admitted(_)));
    ledger
        .throttle(&other, ThrottleKind::CoolingDown, at(9_000))
        .await
        .unwrap();
    assert_eq!(
        admit(&*ledger, 10, at(10_000)).await.clone(),
        reservation_shape()
    );
}

fn reservation_shape() -> Admission {
    Admission::Admitted(Reservation {
        id: stormgate_shared::governor::ReservationId(2),
        deployment: dep(),
        tokens: Tokens(10),
        admitted_at: at(10_000),
        sent: false,
    })
}

async fn governor_turns_huge_retry_after_into_down(ledger: Arc<dyn Ledger>) {
    let governor = Governor::new(
        ledger,
        GovernorPolicy::default(),
        [DeploymentBudget {
            tier: Tier::Premium,
            deployment: dep(),
            tpm: 60_000,
            rpm: 360,
        }],
    );
    let t = governor
        .report_throttle(&dep(), Duration::from_secs(7), at(0))
        .await
        .unwrap();
    assert_eq!(t, Throttle::CoolingDown { until: at(7_000) });
    let t = governor
        .report_throttle(&dep(), Duration::from_secs(86_400), at(0))
        .await
        .unwrap();
    assert_eq!(
        t,
        Throttle::Down {
            until: at(86_400_000)
        }
    );
    assert_eq!(
        governor
            .admit(&dep(), Tokens(100), at(8_000))
            .await
            .unwrap(),
        Admission::Down {
            until: at(86_400_000)
        }
    );
    // 60k TPM, 10% headroom, 10 s window holding twice its share: 18,000 tokens is the
    // largest call there can be.
    assert_eq!(
        governor
            .admit(&dep(), Tokens(18_001), at(8_000))
            .await
            .unwrap(),
        Admission::TooLarge {
            tokens: Tokens(18_001),
            limit: Tokens(18_000)
        }
    );
    let gauges = governor.gauges(at(8_000)).await.unwrap();
    assert_eq!(gauges.len(), 1);
    assert_eq!(gauges[0].ledger.down_until, Some(at(86_400_000)));
    assert_eq!(gauges[0].remaining_tokens, 18_000);
}

async fn observe(
    ledger: &dyn Ledger,
    tokens: Option<u64>,
    requests: Option<u64>,
    now: EpochMillis,
) -> ExternalUsage {
    ledger
        .observe_remaining(&dep(), &LIMITS, ReportedRemaining { tokens, requests }, now)
        .await
        .unwrap()
}

async fn a_report_of_fewer_remaining_tokens_holds_the_shortfall_for_a_window(
    ledger: Arc<dyn Ledger>,
) {
    reservation(admit(&*ledger, 200, at(0)).await);
    // 800 free by our count; the deployment says 300: 500 are held back until 11 s.
    assert_eq!(
        observe(&*ledger, Some(300), None, at(1_000)).await,
        ExternalUsage {
            tokens: 500,
            requests: 0,
            until: Some(at(11_000))
        }
    );
    assert_eq!(
        admit(&*ledger, 400, at(1_500)).await,
        Admission::Deferred {
            retry_at: at(10_000)
        }
    );
    reservation(admit(&*ledger, 300, at(1_500)).await);
    // Reporting as much or more than is free changes nothing.
    let held = observe(&*ledger, Some(5_000), Some(100), at(2_000)).await;
    assert_eq!(held.tokens, 500);
    assert_eq!(held.until, Some(at(11_000)));
    let snap = ledger.snapshot(&dep(), &LIMITS, at(2_000)).await.unwrap();
    assert_eq!(snap.external, held);
    assert_eq!(snap.shortfalls, 1);
    assert_eq!(snap.window_tokens, 500, "the reservation is not a charge");

    // At 10 s the first call leaves; the external reservation ends at 11 s, before the
    // second call leaves at 11.5 s, so that is when 300 more fit.
    assert_eq!(
        admit(&*ledger, 300, at(10_500)).await,
        Admission::Deferred {
            retry_at: at(11_000)
        }
    );
    reservation(admit(&*ledger, 300, at(11_000)).await);
    let snap = ledger.snapshot(&dep(), &LIMITS, at(11_000)).await.unwrap();
    assert_eq!(snap.external, ExternalUsage::default());
}

async fn a_report_of_fewer_remaining_requests_holds_request_slots(ledger: Arc<dyn Ledger>) {
    // Three requests free by our count; the deployment says one.
    assert_eq!(
        observe(&*ledger, None, Some(1), at(0)).await,
        ExternalUsage {
            tokens: 0,
            requests: 2,
            until: Some(at(10_000))
        }
    );
    reservation(admit(&*ledger, 10, at(0)).await);
    assert_eq!(
        admit(&*ledger, 10, at(100)).await,
        Admission::Deferred {
            retry_at: at(10_000)
        }
    );
    // A second, lower report only adds what is missing.
    assert_eq!(observe(&*ledger, None, Some(0), at(200)).await.requests, 2);
    reservation(admit(&*ledger, 10, at(10_000)).await);
}

async fn a_later_shortfall_grows_the_reservation_and_restarts_its_window(ledger: Arc<dyn Ledger>) {
    observe(&*ledger, Some(700), None, at(0)).await;
    let grown = observe(&*ledger, Some(100), None, at(4_000)).await;
    assert_eq!(
        grown,
        ExternalUsage {
            tokens: 900,
            requests: 0,
            until: Some(at(14_000))
        }
    );
    // A report from a caller whose clock lags counts at the ledger's time (4 s).
    let lagging = observe(&*ledger, Some(50), None, at(1_000)).await;
    assert_eq!(lagging.tokens, 950);
    assert_eq!(lagging.until, Some(at(14_000)));
    reservation(admit(&*ledger, 50, at(5_000)).await);
    assert!(matches!(
        admit(&*ledger, 1, at(5_000)).await,
        Admission::Deferred { .. }
    ));
}

async fn gauges_count_the_external_reservation_as_spent(ledger: Arc<dyn Ledger>) {
    let governor = Governor::new(
        ledger,
        GovernorPolicy::default(),
        [DeploymentBudget {
            tier: Tier::Premium,
            deployment: dep(),
            tpm: 60_000,
            rpm: 360,
        }],
    );
    // 18,000 tokens per 10 s window after headroom (twice the even share of 54,000 a
    // minute); the deployment reports 1,000 left.
    let reported = ReportedRemaining {
        tokens: Some(1_000),
        requests: None,
    };
    let held = governor
        .observe_remaining(&dep(), reported, at(0))
        .await
        .unwrap();
    assert_eq!(held.tokens, 17_000);
    let gauges = governor.gauges(at(1)).await.unwrap();
    assert_eq!(gauges[0].remaining_tokens, 1_000);
    assert_eq!(
        governor.admit(&dep(), Tokens(1_001), at(1)).await.unwrap(),
        Admission::Deferred {
            retry_at: at(10_000)
        }
    );
    assert!(matches!(
        governor.admit(&dep(), Tokens(1_000), at(1)).await.unwrap(),
        Admission::Admitted(_)
    ));
    let nothing = governor
        .observe_remaining(&dep(), ReportedRemaining::default(), at(2))
        .await
        .unwrap();
    assert_eq!(nothing, ExternalUsage::default());
}

async fn a_send_takes_its_holds_place_in_the_windows(ledger: Arc<dyn Ledger>) {
    let hold = reservation(admit(&*ledger, 600, at(0)).await);
    // Sent 4 s later for what the request really costs: the hold's 600 leave, 500 enter.
    let sent = reservation(send(&*ledger, 500, Some(&hold), at(4_000)).await);
    assert_eq!(sent.admitted_at, at(4_000));
    assert_ne!(sent.id, hold.id);
    let snapshot = ledger.snapshot(&dep(), &LIMITS, at(4_000)).await.unwrap();
    assert_eq!(
        (
            snapshot.window_tokens,
            snapshot.window_requests,
            snapshot.minute_tokens
        ),
        (500, 1, 500)
    );
    assert_eq!(
        snapshot.admitted, 1,
        "the send of a hold is not a second admission"
    );
    // The hold is gone for good: settling it changes nothing.
    assert_eq!(
        ledger.reconcile(&hold, Tokens::ZERO).await.unwrap(),
        Reconciliation::Settled
    );
    // The short window now runs from the send: 500 left until 14 s.
    reservation(admit(&*ledger, 500, at(10_500)).await);
    assert_eq!(
        admit(&*ledger, 1, at(10_500)).await,
        Admission::Deferred {
            retry_at: at(14_000)
        }
    );
}

async fn sends_are_paced_by_the_one_second_window_and_holds_do_not_count(ledger: Arc<dyn Ledger>) {
    // Three holds at once (the short window's three requests), one send a second.
    let mut holds = Vec::new();
    for _ in 0..3 {
        holds.push(reservation(admit(&*ledger, 100, at(0)).await));
    }
    reservation(send(&*ledger, 100, Some(&holds[0]), at(0)).await);
    assert_eq!(
        send(&*ledger, 100, Some(&holds[1]), at(500)).await,
        Admission::Deferred {
            retry_at: at(1_000)
        }
    );
    // The deferred send kept its hold: the short window still holds three requests.
    let snapshot = ledger.snapshot(&dep(), &LIMITS, at(500)).await.unwrap();
    assert_eq!(snapshot.window_requests, 3);
    reservation(send(&*ledger, 100, Some(&holds[1]), at(1_000)).await);
    reservation(send(&*ledger, 100, Some(&holds[2]), at(2_000)).await);
    // A send with no hold (a retry) needs a request slot of its own: all three are taken.
    assert_eq!(
        send(&*ledger, 100, None, at(3_000)).await,
        Admission::Deferred {
            retry_at: at(10_000)
        }
    );
}

async fn a_send_the_windows_cannot_take_leaves_its_hold(ledger: Arc<dyn Ledger>) {
    let hold = reservation(admit(&*ledger, 400, at(0)).await);
    reservation(admit(&*ledger, 500, at(0)).await);
    // 400 of the hold + 500 + 200 more would be 1,100 > 1,000: the send of 600 is deferred
    // until the other admission leaves the short window, and the hold stays.
    assert_eq!(
        send(&*ledger, 600, Some(&hold), at(1_000)).await,
        Admission::Deferred {
            retry_at: at(10_000)
        }
    );
    let snapshot = ledger.snapshot(&dep(), &LIMITS, at(1_000)).await.unwrap();
    assert_eq!(snapshot.window_tokens, 900);
    // Giving the hold back frees it.
    assert_eq!(
        ledger.reconcile(&hold, Tokens::ZERO).await.unwrap(),
        Reconciliation::Refunded(Tokens(400))
    );
    let sent = reservation(send(&*ledger, 500, None, at(1_000)).await);
    // The call failed: giving it back refunds the window and takes it out of the used total.
    assert_eq!(
        ledger.reconcile(&sent, Tokens::ZERO).await.unwrap(),
        Reconciliation::Refunded(Tokens(500))
    );
    let snapshot = ledger.snapshot(&dep(), &LIMITS, at(1_000)).await.unwrap();
    assert_eq!((snapshot.used_tokens, snapshot.window_tokens), (0, 500));
    assert_eq!(
        ledger.reconcile(&sent, Tokens::ZERO).await.unwrap(),
        Reconciliation::Settled
    );
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(std::sync::Arc::new(super::MemoryLedger::new())).await;
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test]
                async fn $name() {
                    let server = super::RedisServer::start().unwrap();
                    let ledger = super::RedisLedger::new(server.connection_manager().await.unwrap(), "test:gov");
                    super::$name(std::sync::Arc::new(ledger)).await;
                }
            )*
        }
    };
}

conformance!(
    admits_within_window_and_defers_when_tokens_are_spent,
    defers_when_request_count_is_spent,
    deferral_waits_for_as_many_old_entries_as_needed,
    refund_of_unused_tokens_makes_room,
    reconciling_twice_or_after_expiry_changes_nothing,
    defers_until_the_minute_has_room_though_the_short_window_has,
    overrun_is_charged_to_the_window,
    cooldown_is_respected_and_never_shortened,
    down_deployment_answers_down_before_anything_else,
    lagging_clock_cannot_reopen_a_closed_window,
    deployments_have_separate_budgets,
    governor_turns_huge_retry_after_into_down,
    a_report_of_fewer_remaining_tokens_holds_the_shortfall_for_a_window,
    a_report_of_fewer_remaining_requests_holds_request_slots,
    a_later_shortfall_grows_the_reservation_and_restarts_its_window,
    gauges_count_the_external_reservation_as_spent,
    a_send_takes_its_holds_place_in_the_windows,
    sends_are_paced_by_the_one_second_window_and_holds_do_not_count,
    a_send_the_windows_cannot_take_leaves_its_hold,
);

/// Client commands sent to Redis so far (`INFO commandstats`): scripts and anything else,
/// not the commands scripts run inside the server, nor the INFO asking.
async fn client_commands(connection: &mut ::redis::aio::ConnectionManager) -> u64 {
    const SCRIPT_CALLS: [&str; 4] = ["evalsha", "eval", "script|load", "script"];
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let calls: u64 = rest.split(',').next()?.parse().ok()?;
            SCRIPT_CALLS.contains(&name).then_some(calls)
        })
        .sum()
}

#[tokio::test]
async fn an_admitted_job_costs_the_redis_governor_two_round_trips() {
    let server = RedisServer::start().unwrap();
    let ledger = RedisLedger::new(server.connection_manager().await.unwrap(), "trips:gov");
    ledger.preload().await.unwrap();
    let governor = Governor::new(
        Arc::new(ledger),
        GovernorPolicy::default(),
        [DeploymentBudget {
            tier: Tier::Premium,
            deployment: dep(),
            tpm: 10_000_000,
            rpm: 60_000,
        }],
    );
    let mut stats = server.connection_manager().await.unwrap();
    let before = client_commands(&mut stats).await;
    const JOBS: u64 = 50;
    for n in 0..JOBS {
        let reservation = match governor.admit(&dep(), Tokens(1_500), at(n)).await.unwrap() {
            Admission::Admitted(r) => r,
            other => panic!("expected an admission, got {other:?}"),
        };
        let sent = match governor
            .send(&dep(), Tokens(1_400), Some(&reservation), at(n))
            .await
            .unwrap()
        {
            Admission::Admitted(r) => r,
            other => panic!("expected the send to go out, got {other:?}"),
        };
        // Settled at what the send charged: nothing left to tell the ledger.
        assert_eq!(
            governor.reconcile(&sent, Tokens(1_400)).await.unwrap(),
            Reconciliation::Settled
        );
    }
    let sent = client_commands(&mut stats).await - before;
    assert_eq!(
        sent,
        2 * JOBS,
        "the dispatcher's hold and the send, one script each"
    );
    // A failed call given back costs one more.
    let hold = match governor
        .admit(&dep(), Tokens(1_500), at(JOBS))
        .await
        .unwrap()
    {
        Admission::Admitted(r) => r,
        other => panic!("expected an admission, got {other:?}"),
    };
    let Admission::Admitted(sent_call) = governor
        .send(&dep(), Tokens(1_400), Some(&hold), at(JOBS))
        .await
        .unwrap()
    else {
        panic!("expected the send to go out");
    };
    assert_eq!(
        governor.reconcile(&sent_call, Tokens::ZERO).await.unwrap(),
        Reconciliation::Refunded(Tokens(1_400))
    );
}
