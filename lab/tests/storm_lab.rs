//! The storm lab end to end on a shortened seed storm: determinism and the acceptance figures.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use stormgate_lab::replay::{ReplayOptions, replay};
use stormgate_lab::report::Report;
use stormgate_lab::scenario::Scenario;

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
    use stormgate_lab::replay::{Backend, PolicyName};
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

#[tokio::test]
async fn a_plan_point_gives_exactly_what_the_replay_gives_at_its_quotas() {
    use std::sync::Arc;
    use stormgate_lab::plan::{Quotas, run_point, scenario_at};
    use stormgate_lab::replay::{PolicyName, PreparedTrace};
    use stormgate_lab::trace::TraceEvent;

    let scenario = Scenario::seed_storm().unwrap().compressed(0.01);
    let quotas = Quotas {
        premium_tpm: 14_000,
        standard_tpm: 85_000,
        headroom: 0.1,
    };
    let options = ReplayOptions {
        seed: 7,
        policies: vec![PolicyName::Stormgate],
        ..ReplayOptions::default()
    };
    let at_quotas = scenario_at(&scenario, quotas);
    let runs = replay(&at_quotas, &options, &mut |_, _| {}).await.unwrap();
    let direct = Report::build(&at_quotas, 7, &runs, 0.0);

    let events: Vec<TraceEvent> = scenario
        .plan(7)
        .unwrap()
        .into_iter()
        .map(TraceEvent::Planned)
        .collect();
    let trace = Arc::new(PreparedTrace::prepare(events, 7, 2).unwrap());
    let (point, planned) = run_point(&scenario, trace, quotas, &options).await.unwrap();
    assert_eq!(
        serde_json::to_string(&planned).unwrap(),
        serde_json::to_string(&direct).unwrap()
    );
    assert_eq!(point.cost_usd, direct.policies[0].cost_usd);
    assert_eq!(point.meets_slos, direct.policies[0].verdict.met);
    let ingest = direct.policies[0].ingest.as_ref().unwrap();
    assert!(ingest.accepted > 0);
    assert_eq!(ingest.rejected, 0);
}

#[tokio::test]
async fn a_resolved_ticket_counts_no_wait_and_a_replaced_job_is_counted_cancelled() {
    use stormgate_lab::history::{HistoryOptions, read_history};
    use stormgate_lab::replay::{PolicyName, replay_trace};

    // One ticket arrives resolved (no technician job), one is updated while its first
    // job is still held (P3 jobs with a coalescing key wait 225 s): the first job is
    // replaced, the second is served.
    let text = "number,sys_updated_on,priority,state,sys_mod_count,cmdb_ci,u_region
INC1,2026-01-12 06:00:00,3,Resolved,4,ar01,north
INC2,2026-01-12 06:00:00,3,In Progress,0,ar02,north
INC2,2026-01-12 06:01:00,3,In Progress,1,ar02,north
";
    let scenario = Scenario::seed_storm().unwrap();
    let history = read_history(
        text.as_bytes(),
        "t.csv",
        &HistoryOptions::new(scenario.start_millis().unwrap(), 1.0),
    )
    .unwrap();
    let options = ReplayOptions {
        policies: vec![PolicyName::Stormgate],
        ..ReplayOptions::default()
    };
    let runs = replay_trace(&scenario, history.events, &options, &mut |_, _| {})
        .await
        .unwrap();
    let report = Report::build(&scenario, 0, &runs, 0.0).with_history(history.report);
    let sg = &report.policies[0];
    assert_eq!(sg.cancelled_jobs, 1, "{sg:#?}");
    // INC2's served job waited its hold (queued at 06:01, held 225 s), nowhere near
    // the run's length; INC1 had nothing to wait for.
    let p3 = sg.max_wait_seconds["P3"];
    assert!((200.0..400.0).contains(&p3), "P3 max wait {p3}");
    assert_eq!(sg.without_llm_summary.get("P3").copied().unwrap_or(0), 0);
    assert!(sg.verdict.met, "{}", sg.verdict.line("stormgate"));
    assert!(report.scenario.history.is_some());
    assert!(table_names_the_history(&report));
}

fn table_names_the_history(report: &Report) -> bool {
    let t = stormgate_lab::report::table(report);
    t.contains("history t.csv") && !t.contains("780 min")
}
