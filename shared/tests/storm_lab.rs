//! The storm lab end to end on a shortened seed storm: determinism and the acceptance figures.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use stormgate_shared::lab::replay::{ReplayOptions, replay};
use stormgate_shared::lab::report::Report;
use stormgate_shared::lab::scenario::Scenario;

/// The seed storm with every phase shortened to 3%: a storm in small.
fn short_storm() -> Scenario {
    Scenario::seed_storm().unwrap().compressed(0.03)
}

async fn run(seed: u64) -> Report {
    let scenario = short_storm();
    let options = ReplayOptions {
        seed,
        ..ReplayOptions::default()
    };
    let runs = replay(&scenario, &options, &mut |_, _| {}).await.unwrap();
    Report::build(&scenario, seed, &runs, 0.0)
}

#[tokio::test]
async fn same_seed_gives_identical_reports() {
    let a = serde_json::to_string(&run(11).await).unwrap();
    let b = serde_json::to_string(&run(11).await).unwrap();
    assert_eq!(a, b);
}

#[tokio::test]
async fn stormgate_meets_the_acceptance_figures_and_naive_shows_the_cascade() {
    let report = run(2026).await;
    let naive = report.policy("naive").unwrap();
    let sg = report.policy("stormgate").unwrap();
    assert_eq!(naive.tickets, sg.tickets);
    assert!(sg.tickets > 1_000, "{} tickets", sg.tickets);
    assert!(naive.http_429 > 0, "naive shows 429s");
    assert!(
        sg.http_429 as f64 <= 0.001 * sg.llm_calls as f64,
        "stormgate: {} 429s in {} calls",
        sg.http_429,
        sg.llm_calls
    );
    assert_eq!(sg.summaries.none, 0);
    for (severity, p) in &sg.first_summary_seconds {
        assert!(p.max <= 1.0, "{severity} first summary max {}", p.max);
    }
    assert!(sg.cost_usd < naive.cost_usd);
}

#[tokio::test]
async fn redis_gives_the_same_results_as_memory() {
    use stormgate_shared::lab::replay::{Backend, PolicyName};
    use stormgate_shared::testing::redis_server::RedisServer;

    let scenario = Scenario::seed_storm().unwrap().compressed(0.01);
    let server = RedisServer::start().unwrap();
    let mut reports = Vec::new();
    for backend in [Backend::Memory, Backend::Redis(server.url())] {
        let options = ReplayOptions {
            seed: 5,
            policies: vec![PolicyName::Stormgate],
            backend,
            ..ReplayOptions::default()
        };
        let runs = replay(&scenario, &options, &mut |_, _| {}).await.unwrap();
        let report = Report::build(&scenario, 5, &runs, 0.0);
        assert!(report.policies[0].llm_calls > 0);
        reports.push(serde_json::to_string(&report).unwrap());
    }
    assert_eq!(reports[0], reports[1]);
}
