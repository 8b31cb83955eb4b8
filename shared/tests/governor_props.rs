//! Property tests of the governor on virtual time: whatever the arrivals, call sizes,
//! completion times, usages and 429s, no window ever holds more than the budget.
//!
//! The checked statements are the module docs' proof obligations: in any window of the
//! governor's short length, charged tokens ≤ `L_tok` and requests ≤ `L_req`; in any 10 s
//! window, requests ≤ RPM/6; in any 60 s window, tokens ≤ TPM × (1 − headroom); and
//! nothing is admitted while the deployment cools down or is down; right after the
//! deployment reports `R` tokens remaining, no call costing more than `R` is admitted,
//! and reports never break the window bounds. A reservation's
//! charge is what the ledger held when it left the window: its real usage if reconciled
//! while inside, its reservation otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::governor::{
    Admission, BurstFactor, DeploymentBudget, Governor, GovernorPolicy, Ledger, MemoryLedger,
    RedisLedger, ReportedRemaining, Reservation, ShortWindow, Throttle,
};
use stormgate_shared::headroom::Headroom;
use stormgate_shared::job::Tier;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::tokens::Tokens;

const T0: u64 = 1_800_000_000_000;

#[derive(Debug, Clone)]
enum Step {
    /// A call arrives `gap_ms` after the previous step; if admitted it completes after
    /// `runs_ms`, having used `used_permille`/1000 of its reservation.
    Call {
        gap_ms: u64,
        cost_permille: u16,
        runs_ms: u64,
        used_permille: u16,
    },
    /// A worker reports a 429 asking to wait `retry_after_ms`.
    Throttled { gap_ms: u64, retry_after_ms: u64 },
    /// An answer says the deployment has `remaining_permille`/1000 of a window's tokens
    /// left (and `remaining_requests` requests).
    Reported {
        gap_ms: u64,
        remaining_permille: u16,
        remaining_requests: u64,
    },
}

#[derive(Debug, Clone)]
struct Scenario {
    tpm: u64,
    /// Requests per minute per 1,000 TPM: 1 (the gpt-4.1 family) or 6 (gpt-4o).
    rpm_per_1000: u64,
    headroom: f64,
    window_ms: u64,
    burst: u64,
    steps: Vec<Step>,
}

fn step() -> impl Strategy<Value = Step> {
    // Bursts (gap 0) are as likely as spread arrivals; calls run from instantly to 2 min.
    let gap = prop_oneof![Just(0u64), 0u64..200, 0u64..5_000, 0u64..30_000];
    prop_oneof![
        20 => (gap.clone(), 1u16..=1_050, 0u64..120_000, 0u16..=1_000).prop_map(
            |(gap_ms, cost_permille, runs_ms, used_permille)| Step::Call { gap_ms, cost_permille, runs_ms, used_permille }
        ),
        1 => (gap.clone(), prop_oneof![1u64..30_000, 600_000u64..90_000_000]).prop_map(
            |(gap_ms, retry_after_ms)| Step::Throttled { gap_ms, retry_after_ms }
        ),
        4 => (gap, 0u16..=1_200, 0u64..50).prop_map(
            |(gap_ms, remaining_permille, remaining_requests)| Step::Reported { gap_ms, remaining_permille, remaining_requests }
        ),
    ]
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop_oneof![Just(1_000u64), Just(10_000), 30_000u64..2_000_000],
        prop_oneof![Just(1u64), Just(6u64)],
        0.0f64..0.5,
        prop_oneof![Just(10_000u64), Just(5_000), Just(1_000), Just(2_500)],
        1u64..=3,
        prop::collection::vec(step(), 1..400),
    )
        .prop_map(
            |(tpm, rpm_per_1000, headroom, window_ms, burst, steps)| Scenario {
                tpm,
                rpm_per_1000,
                headroom,
                window_ms,
                burst,
                steps,
            },
        )
}

#[derive(Debug)]
struct Admitted {
    at: u64,
    reserved: u64,
    /// (reconciled at, used)
    settled: Option<(u64, u64)>,
}

impl Admitted {
    fn charge(&self, window_ms: u64) -> u64 {
        match self.settled {
            Some((when, used)) if when < self.at + window_ms => used,
            _ => self.reserved,
        }
    }
}

/// Runs a scenario against a ledger and checks every window afterwards.
async fn run(
    ledger: Arc<dyn Ledger>,
    deployment: DeploymentName,
    s: &Scenario,
) -> Result<(), TestCaseError> {
    let policy = GovernorPolicy {
        headroom: Headroom::new(s.headroom).unwrap(),
        window: ShortWindow::from_millis(s.window_ms).unwrap(),
        burst: BurstFactor::new(s.burst).unwrap(),
        down_after: Duration::from_secs(600),
    };
    let budget = DeploymentBudget {
        tier: Tier::Premium,
        deployment: deployment.clone(),
        tpm: s.tpm,
        rpm: s.tpm * s.rpm_per_1000 / 1_000,
    };
    let rpm = budget.rpm();
    let governor = Governor::new(ledger, policy, [budget]);
    let limits = governor.limits(&deployment).unwrap();

    let mut now = T0;
    let mut admitted: Vec<Admitted> = Vec::new();
    let mut running: Vec<(u64, usize, Reservation, u64)> = Vec::new();
    let mut blocked: Vec<(u64, u64)> = Vec::new();
    for step in &s.steps {
        let gap = match step {
            Step::Call { gap_ms, .. }
            | Step::Throttled { gap_ms, .. }
            | Step::Reported { gap_ms, .. } => *gap_ms,
        };
        now += gap;
        running.sort_by_key(|r| r.0);
        while running.first().is_some_and(|r| r.0 <= now) {
            let (done, index, reservation, used) = running.remove(0);
            governor
                .reconcile(&reservation, Tokens(used))
                .await
                .unwrap();
            admitted[index].settled = Some((done, used));
        }
        match *step {
            Step::Call {
                cost_permille,
                runs_ms,
                used_permille,
                ..
            } => {
                let cost = (limits.tokens * u64::from(cost_permille) / 1_000).max(1);
                match governor
                    .admit(&deployment, Tokens(cost), EpochMillis(now))
                    .await
                    .unwrap()
                {
                    Admission::Admitted(r) => {
                        prop_assert!(r.admitted_at.0 >= now);
                        prop_assert!(
                            !blocked
                                .iter()
                                .any(|&(from, until)| (from..until).contains(&r.admitted_at.0)),
                            "admitted at {} while cooling down or down",
                            r.admitted_at.0
                        );
                        let used = cost * u64::from(used_permille) / 1_000;
                        let r_at = r.admitted_at.0;
                        running.push((now + runs_ms, admitted.len(), r, used));
                        admitted.push(Admitted {
                            at: r_at,
                            reserved: cost,
                            settled: None,
                        });
                    }
                    Admission::TooLarge { tokens, limit } => {
                        prop_assert!(tokens > limit || limits.requests == 0)
                    }
                    Admission::Deferred { retry_at } => prop_assert!(retry_at.0 > now),
                    Admission::CoolingDown { until } | Admission::Down { until } => {
                        prop_assert!(until.0 > now)
                    }
                }
            }
            Step::Throttled { retry_after_ms, .. } => {
                let t = governor
                    .report_throttle(
                        &deployment,
                        Duration::from_millis(retry_after_ms),
                        EpochMillis(now),
                    )
                    .await
                    .unwrap();
                let (Throttle::CoolingDown { until } | Throttle::Down { until }) = t;
                blocked.push((now, until.0));
            }
            Step::Reported {
                remaining_permille,
                remaining_requests,
                ..
            } => {
                let remaining = limits.tokens * u64::from(remaining_permille) / 1_000;
                let reported = ReportedRemaining {
                    tokens: Some(remaining),
                    requests: Some(remaining_requests),
                };
                governor
                    .observe_remaining(&deployment, reported, EpochMillis(now))
                    .await
                    .unwrap();
                let probe = governor
                    .admit(&deployment, Tokens(remaining + 1), EpochMillis(now))
                    .await
                    .unwrap();
                prop_assert!(
                    !matches!(probe, Admission::Admitted(_)),
                    "{} tokens admitted right after the deployment reported {remaining} left",
                    remaining + 1
                );
            }
        }
    }

    let window_ms = s.window_ms;
    // A charge counts as the ledger held it when the entry left the window measured.
    let windows = |length: u64| -> Vec<(u64, u64, u64)> {
        let held_for = if length >= 60_000 { 60_000 } else { window_ms };
        admitted
            .iter()
            .map(|start| {
                let inside = admitted
                    .iter()
                    .filter(|a| a.at >= start.at && a.at < start.at + length);
                let (tokens, requests) =
                    inside.fold((0u64, 0u64), |(t, r), a| (t + a.charge(held_for), r + 1));
                (start.at, tokens, requests)
            })
            .collect()
    };
    for (at, tokens, requests) in windows(s.window_ms) {
        prop_assert!(
            tokens <= limits.tokens,
            "{tokens} tokens in the window from {at}, limit {}",
            limits.tokens
        );
        prop_assert!(
            requests <= limits.requests,
            "{requests} requests in the window from {at}"
        );
    }
    // RPM/6 per 10 s minus headroom; only a deployment too small for one headroomed
    // request per window is allowed one where Azure allows it (`WindowLimits::for_budget`).
    let headroomed_rpm = (rpm as f64 * (1.0 - s.headroom)).floor() as u64;
    let windows_per_minute = 60_000 / s.window_ms;
    let ten_second_requests = if headroomed_rpm / windows_per_minute >= 1 {
        headroomed_rpm / 6
    } else {
        rpm / 6
    };
    for (at, _, requests) in windows(10_000) {
        prop_assert!(
            requests <= ten_second_requests,
            "{requests} requests in 10 s from {at}, RPM {rpm}, headroom {}",
            s.headroom
        );
    }
    let minute_tokens = (s.tpm as f64 * (1.0 - s.headroom)).floor() as u64;
    for (at, tokens, requests) in windows(60_000) {
        prop_assert!(
            tokens <= minute_tokens,
            "{tokens} tokens in 60 s from {at}, budget {minute_tokens}"
        );
        prop_assert!(requests <= rpm, "{requests} requests in 60 s from {at}");
    }
    Ok(())
}

/// A call the dispatcher holds at `gap_ms` after the previous one and the tier worker sends
/// `handoff_ms` later (a Storage-queue hand-off), costing `cost_permille`/1000 of the short
/// window's tokens.
#[derive(Debug, Clone)]
struct HeldCall {
    gap_ms: u64,
    handoff_ms: u64,
    cost_permille: u16,
}

fn held_calls() -> impl Strategy<Value = (u64, Vec<HeldCall>)> {
    let gap = prop_oneof![Just(0u64), 0u64..500, 0u64..5_000];
    (
        prop_oneof![Just(10_000u64), Just(60_000), 100_000u64..600_000],
        prop::collection::vec(
            (
                gap,
                prop_oneof![Just(0u64), 0u64..3_000, 0u64..40_000],
                1u16..=600,
            )
                .prop_map(|(gap_ms, handoff_ms, cost_permille)| HeldCall {
                    gap_ms,
                    handoff_ms,
                    cost_permille,
                }),
            1..150,
        ),
    )
}

/// A gpt-4.1 deployment (1 request per minute per 1,000 TPM): calls held by the dispatcher and
/// sent after any hand-off delay, each send waiting for the governor as the retry layer does.
/// What reaches the deployment, by send time, never exceeds Azure's request limits in any
/// second, any 10 s or any minute, nor its tokens in any minute.
async fn sends_stay_within_every_window(tpm: u64, calls: &[HeldCall]) -> Result<(), TestCaseError> {
    let deployment: DeploymentName = "premium".parse().unwrap();
    let rpm = tpm / 1_000;
    let budget = DeploymentBudget {
        tier: Tier::Premium,
        deployment: deployment.clone(),
        tpm,
        rpm,
    };
    let governor = Governor::new(
        Arc::new(MemoryLedger::new()),
        GovernorPolicy::default(),
        [budget],
    );
    let limits = governor.limits(&deployment).unwrap();
    // (send due at, call index, the hold)
    let mut pending: Vec<(u64, usize, Reservation)> = Vec::new();
    let mut sent: Vec<(u64, u64)> = Vec::new();
    let mut now = T0;
    let mut arrivals = calls.iter().enumerate().peekable();
    let mut next_arrival = T0 + calls.first().map_or(0, |c| c.gap_ms);
    loop {
        pending.sort_by_key(|p| p.0);
        let next_send = pending.first().map(|p| p.0);
        let take_arrival =
            arrivals.peek().is_some() && next_send.is_none_or(|send| next_arrival <= send);
        if take_arrival {
            let (i, call) = arrivals.next().unwrap();
            now = now.max(next_arrival);
            let cost = (limits.tokens * u64::from(call.cost_permille) / 1_000).max(1);
            if let Admission::Admitted(hold) = governor
                .admit(&deployment, Tokens(cost), EpochMillis(now))
                .await
                .unwrap()
            {
                pending.push((now + call.handoff_ms, i, hold));
            }
            if let Some((_, following)) = arrivals.peek() {
                next_arrival = now + following.gap_ms;
            }
            continue;
        }
        let Some(due) = next_send else { break };
        let (_, i, hold) = pending.remove(0);
        now = now.max(due);
        match governor
            .send(&deployment, hold.tokens, Some(&hold), EpochMillis(now))
            .await
            .unwrap()
        {
            Admission::Admitted(r) => {
                prop_assert!(r.admitted_at.0 >= now);
                sent.push((r.admitted_at.0, r.tokens.get()));
            }
            Admission::Deferred { retry_at } => {
                prop_assert!(retry_at.0 > now);
                // Waits as the retry layer does, a few milliseconds past the instant.
                pending.push((retry_at.0 + (i as u64 % 7), i, hold));
            }
            other => prop_assert!(false, "unexpected {other:?}"),
        }
    }
    sent.sort_unstable();
    let most = |length: u64, weight: &dyn Fn(u64) -> u64| {
        sent.iter()
            .map(|&(start, _)| {
                sent.iter()
                    .filter(|&&(at, _)| at >= start && at < start + length)
                    .map(|&(_, tokens)| weight(tokens))
                    .sum::<u64>()
            })
            .max()
            .unwrap_or(0)
    };
    prop_assert!(most(1_000, &|_| 1) <= (rpm / 60).max(1), "{sent:?}");
    prop_assert!(most(10_000, &|_| 1) <= (rpm / 6).max(1), "{sent:?}");
    prop_assert!(most(60_000, &|_| 1) <= rpm, "{sent:?}");
    prop_assert!(most(60_000, &|tokens| tokens) <= limits.minute_tokens);
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(Config::with_cases(256))]

    #[test]
    fn one_request_per_thousand_tpm_deployment_never_receives_more_per_window(
        (tpm, calls) in held_calls()
    ) {
        runtime().block_on(sends_stay_within_every_window(tpm, &calls))?;
    }

    #[test]
    fn memory_governor_never_exceeds_any_window(s in scenario()) {
        let deployment: DeploymentName = "premium".parse().unwrap();
        runtime().block_on(run(Arc::new(MemoryLedger::new()), deployment, &s))?;
    }
}

#[test]
fn redis_governor_never_exceeds_any_window() {
    let server = RedisServer::start().unwrap();
    let rt = runtime();
    let ledger: Arc<dyn Ledger> = Arc::new(RedisLedger::new(
        rt.block_on(server.connection_manager()).unwrap(),
        "prop:gov",
    ));
    let case = AtomicU64::new(0);
    let mut runner = TestRunner::new(Config::with_cases(48));
    runner
        .run(&scenario(), |s| {
            // A fresh deployment per case: cases must not share a window.
            let n = case.fetch_add(1, Ordering::Relaxed);
            let deployment: DeploymentName = format!("premium-{n}").parse().unwrap();
            rt.block_on(run(ledger.clone(), deployment, &s))
        })
        .unwrap();
}
