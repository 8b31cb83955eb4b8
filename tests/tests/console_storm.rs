//! A storm through the real handler process (real Redis, the product's Azure OpenAI
//! simulator over HTTP, the Functions host stand-in), with `GET /api/status` read at the
//! points where the truth is known: the consumer lag of each partition, the queue depth
//! and oldest age of each severity, the spend against what the simulator billed, and a
//! deployment's state after a forced 429 and after a daily quota. Every signal line the
//! handler logged is checked against the catalog the alert rules are checked against.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::fault_rig;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use fault_rig::{PREMIUM, Rig, RigOptions, STANDARD};
use serde_json::{Value, json};
use stormgate_e2e::kafka::TOPIC;
use stormgate_e2e::tickets::{event, ticket};
use stormgate_handlers::config::Settings;
use stormgate_shared::classifier::Classifier;
use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::ingest::{IngestContext, IngestPolicy, prepare};
use stormgate_shared::severity::Severity;
use stormgate_shared::signals::catalog::{self, COMMON_FIELDS};
use stormgate_shared::store::memory::MemoryStore;

/// A `classify` invocation of `(partition, offset, event, Kafka timestamp)` records, as
/// the host encodes a batch.
fn batch(records: &[(i64, i64, &Value, EpochMillis)]) -> Value {
    let header = base64::engine::general_purpose::STANDARD.encode("incident");
    let encoded: Vec<String> = records
        .iter()
        .map(|(partition, offset, event, at)| {
            json!({
                "Offset": offset, "Partition": partition, "Topic": TOPIC,
                "Timestamp": at.to_string(), "Key": event["sys_id"],
                "Value": event.to_string(),
                "Headers": [{"Key": "table_name", "Value": header}],
            })
            .to_string()
        })
        .collect();
    json!({
        "Data": {"events": serde_json::to_string(&encoded).unwrap()},
        "Metadata": {"sys": {"MethodName": "classify", "UtcNow": "2027-01-15T08:30:01Z", "RandGuid": "r"}}
    })
}

/// Per severity, the jobs the real ingest queues for `events`: (pending, held).
fn expected_queues(events: &[Value]) -> BTreeMap<Severity, (u64, u64)> {
    let classifier = Classifier::embedded().unwrap();
    let store = MemoryStore::new();
    let clock = ManualClock::default();
    let policy = IngestPolicy::default();
    let ctx = IngestContext {
        store: &store,
        clock: &clock,
        classifier: &classifier,
        policy: &policy,
    };
    let mut out: BTreeMap<Severity, (u64, u64)> = BTreeMap::new();
    for e in events {
        for job in prepare(ticket(e), &ctx, clock.now()).unwrap().jobs {
            // The status counts a job where it queues: its rank (a customer notice one
            // level below its routing, a lifted technician job at ServiceNow's priority).
            let slot = out.entry(job.rank()).or_default();
            if job.hold_until.is_some() {
                slot.1 += 1;
            } else {
                slot.0 += 1;
            }
        }
    }
    out
}

async fn status(rig: &Rig) -> Value {
    let response = reqwest::get(format!("{}/api/status", rig.handler_url()))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn series(rig: &Rig, minutes: u64) -> Value {
    reqwest::get(format!(
        "{}/api/series?minutes={minutes}",
        rig.handler_url()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap()
}

fn deployment<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["deployment"] == name)
        .unwrap_or_else(|| panic!("no deployment {name} in {status}"))
}

fn severity<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["severities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["severity"] == name)
        .unwrap()
}

/// A measured time that the test knows up to the time requests take.
fn about(actual: &Value, expected_ms: u64, what: &str) {
    let actual = actual
        .as_u64()
        .unwrap_or_else(|| panic!("{what}: {actual}"));
    assert!(
        (expected_ms..expected_ms + 5_000).contains(&actual),
        "{what}: {actual} ms, expected {expected_ms} ms (and at most 5 s of test time more)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_tells_the_truth_through_a_storm() {
    let mut rig = Rig::start(RigOptions::default()).await;
    let base = rig.handler_url();

    // Six P1 tickets of one fibre cut on partition 0, stamped 90 s ago; six P4 tickets on
    // partition 1, stamped 20 s ago.
    let p1: Vec<Value> = (1..=6).map(|n| event(n, 1, 1)).collect();
    let p3: Vec<Value> = (7..=12)
        .map(|n| {
            // One slow line rather than an outage, so that the classifier leaves it low.
            let mut e = event(n, 2, 1);
            e["priority"] = json!("4");
            e["short_description"] = json!("Customer reports slow speeds in the evening");
            e["description"] = json!(
                "One residential line, speed test 40 of 100 Mbit/s. No alarms on the access node."
            );
            e["u_customers_affected"] = json!("1");
            e["u_alarm_log"] = json!("");
            e["work_notes"] = json!("");
            e["parent_incident"] = Value::Null;
            e
        })
        .collect();
    let now = rig.clock().now();
    let stamped = |ago: u64| EpochMillis(now.0 - ago);
    let mut records = Vec::new();
    for (i, e) in p1.iter().enumerate() {
        records.push((0, i as i64, e, stamped(90_000)));
    }
    for (i, e) in p3.iter().enumerate() {
        records.push((1, i as i64, e, stamped(20_000)));
    }
    let answer = rig.host.invoke(&base, "classify", &batch(&records)).await;
    assert!(answer.is_success(), "{:?} {}", answer.status, answer.body);

    // Lag, per partition: the handler measured it against its own clock.
    let doc = status(&rig).await;
    let partitions = doc["ingest"]["lag"]["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 2, "{partitions:?}");
    for (partition, ago) in [(0, 90_000), (1, 20_000)] {
        let p = &partitions[partition];
        assert_eq!(p["partition"], partition);
        assert_eq!(p["records"], 6);
        about(&p["p50_ms"], ago, "lag p50");
        about(&p["max_ms"], ago, "lag max");
    }

    // Queue depth per severity: what the real ingest queued, held ones apart.
    let all: Vec<Value> = p1.iter().chain(&p3).cloned().collect();
    let expected = expected_queues(&all);
    assert!(
        expected.len() >= 2,
        "the storm has P1 and lower severities: {expected:?}"
    );
    for s in Severity::ALL {
        let (pending, held) = expected.get(&s).copied().unwrap_or_default();
        let got = severity(&doc, s.as_str());
        assert_eq!(got["queued"], pending, "{s} queued: {got}");
        assert_eq!(got["held"], held, "{s} held: {got}");
        assert_eq!(got["in_flight"], 0, "{s}");
    }

    // Two minutes on, nothing dispatched: the oldest P1 job has waited two minutes
    // against its 30 s deadline, and the verdict says so.
    rig.advance_clock(Duration::from_secs(120));
    let doc = status(&rig).await;
    let p1_status = severity(&doc, "P1");
    about(&p1_status["oldest_age_ms"], 120_000, "P1 oldest age");
    assert_eq!(p1_status["oldest_allowed_ms"], 30_000);
    about(&p1_status["behind_ms"], 90_000, "P1 behind");
    assert_eq!(doc["verdict"]["level"], "critical");
    assert!(
        doc["verdict"]["text"]
            .as_str()
            .unwrap()
            .starts_with("P1 summaries 1 min behind"),
        "{}",
        doc["verdict"]
    );
    // The minute classify ran in has its counts and its largest lag in the series.
    let chart = series(&rig, 10).await;
    let points = chart["points"].as_array().unwrap();
    let events: u64 = points.iter().map(|p| p["events"].as_u64().unwrap()).sum();
    assert_eq!(events, 12, "{chart}");
    let busy = points.iter().find(|p| p["events"] == 12).unwrap();
    assert_eq!(busy["accepted"], 12);
    about(&busy["lag_max_ms"], 90_000, "the minute's largest lag");
    // Six records at 20 s and six at 90 s: the (lower) median is 20 s, read back as the
    // upper edge of its histogram bin.
    assert_eq!(busy["lag_p50_ms"], 30_000);

    // The storm is summarized: today's spend is what the simulator billed, at the prices.
    let expected_jobs = Rig::expected_jobs(&all);
    rig.settle(30).await;
    rig.assert_every_job_settled(&expected_jobs).await;
    let doc = status(&rig).await;
    // The handler runs at the settings table's default prices, which `Settings::example` loads.
    let defaults = Settings::example();
    for (name, prices) in [(PREMIUM, &defaults.premium), (STANDARD, &defaults.standard)] {
        let (input, output) = (prices.price_input_per_1m, prices.price_output_per_1m);
        let billed = rig.simulator.core().stats(name).unwrap();
        let d = deployment(&doc, name);
        assert_eq!(d["today"]["prompt_tokens"], billed.prompt_tokens, "{name}");
        assert_eq!(
            d["today"]["completion_tokens"], billed.completion_tokens,
            "{name}"
        );
        let spend = billed.prompt_tokens as f64 * input / 1e6
            + billed.completion_tokens as f64 * output / 1e6;
        let reported = d["today"]["spend_usd"].as_f64().unwrap();
        assert!(
            (reported - spend).abs() < 1e-9,
            "{name}: {reported} vs {spend}"
        );
        assert_eq!(d["state"], "ok");
    }
    assert!(
        deployment(&doc, PREMIUM)["today"]["prompt_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    for s in Severity::ALL {
        let got = severity(&doc, s.as_str());
        assert_eq!(
            (got["queued"].as_u64(), got["in_flight"].as_u64()),
            (Some(0), Some(0))
        );
    }

    // A forced 429 (Retry-After 30 s) on premium: the fleet cools it down, the status
    // says until when, and counts the 429s the simulator sent.
    rig.advance_clock(Duration::from_secs(60));
    let mut faults = rig.simulator.core().faults(PREMIUM).unwrap();
    faults.throttle_rate = 1.0;
    faults.throttle_retry_after_ms = 30_000;
    rig.simulator
        .core()
        .set_faults(PREMIUM, faults.clone())
        .unwrap();
    let before = rig.llm.exchanges().len();
    let more: Vec<Value> = (13..=14).map(|n| event(n, 3, 1)).collect();
    let at = rig.clock().now();
    let records: Vec<_> = more
        .iter()
        .enumerate()
        .map(|(i, e)| (0, 100 + i as i64, e, at))
        .collect();
    assert!(
        rig.host
            .invoke(&base, "classify", &batch(&records))
            .await
            .is_success()
    );
    rig.dispatch().await;
    let answers = rig.host.deliver(&base).await;
    assert!(!answers.is_empty());
    let throttled = rig.llm.exchanges()[before..]
        .iter()
        .filter(|e| e.deployment == PREMIUM && e.status == Some(429))
        .count() as u64;
    assert!(throttled > 0, "the simulator answered 429");
    let doc = status(&rig).await;
    let premium = deployment(&doc, PREMIUM);
    assert_eq!(premium["state"], "cooling_down", "{premium}");
    let until = premium["until"].as_u64().unwrap();
    let now = rig.clock().now().0;
    assert!(
        until > now && until <= now + 30_000,
        "cooling down until {until}, now {now}"
    );
    assert_eq!(premium["throttles_total"], throttled, "{premium}");
    assert!(
        doc["verdict"]["text"]
            .as_str()
            .unwrap()
            .contains("premium throttled (429)"),
        "{}",
        doc["verdict"]
    );
    // The series has every 429 in its per-minute rates (a tick records the running total).
    rig.dispatch().await;
    rig.advance_clock(Duration::from_secs(60));
    rig.dispatch().await;
    let chart = series(&rig, 30).await;
    let rated: u64 = chart["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["deployments"][PREMIUM]["throttles"].as_u64())
        .sum();
    assert_eq!(rated, throttled, "429s per minute over the series");

    // A daily quota (Retry-After 86400): the deployment is down, its work spills.
    faults.throttle_rate = 0.0;
    faults.daily_quota_exhausted = true;
    rig.simulator.core().set_faults(PREMIUM, faults).unwrap();
    rig.advance_clock(Duration::from_secs(60));
    let last: Vec<Value> = (15..=16).map(|n| event(n, 4, 1)).collect();
    let at = rig.clock().now();
    let records: Vec<_> = last
        .iter()
        .enumerate()
        .map(|(i, e)| (0, 200 + i as i64, e, at))
        .collect();
    assert!(
        rig.host
            .invoke(&base, "classify", &batch(&records))
            .await
            .is_success()
    );
    rig.dispatch().await;
    rig.host.deliver(&base).await;
    let doc = status(&rig).await;
    let premium = deployment(&doc, PREMIUM);
    assert_eq!(premium["state"], "down", "{premium}");
    assert!(premium["until"].as_u64().unwrap() > rig.clock().now().0 + 80_000_000);
    assert!(
        doc["verdict"]["text"]
            .as_str()
            .unwrap()
            .starts_with("premium down, spilling to standard"),
        "{}",
        doc["verdict"]
    );
    rig.dispatch().await;

    assert_signal_lines_match_the_catalog(&rig);
}

/// Every line the handler logged under the gauges' target, and every `sinks` line, is an
/// event of the catalog carrying exactly the catalog's fields (and the lines of every
/// event the product emits in such a storm are there).
fn assert_signal_lines_match_the_catalog(rig: &Rig) {
    let log = std::fs::read_to_string(rig.dir().join("handler.log")).unwrap();
    let mut seen = BTreeMap::new();
    for line in log.lines() {
        let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(span) = fields.get("span").and_then(Value::as_object) {
            for name in span.keys() {
                assert!(
                    catalog::SPAN_FIELDS.contains(&name.as_str()),
                    "span.{name} is logged but not in the catalog: {line}"
                );
            }
        }
        if let Some(spec) = fields
            .get("message")
            .and_then(Value::as_str)
            .and_then(catalog::message)
        {
            for name in fields.keys() {
                assert!(
                    COMMON_FIELDS.contains(&name.as_str()) || spec.fields.contains(&name.as_str()),
                    "{name} of {:?} is not in the catalog: {line}",
                    spec.message
                );
            }
        }
        let Some(event) = fields.get("event").and_then(Value::as_str) else {
            continue;
        };
        let target = fields.get("target").and_then(Value::as_str).unwrap_or("");
        if target != catalog::GAUGES && event != "sinks" {
            continue;
        }
        let spec = catalog::event(event)
            .unwrap_or_else(|| panic!("a signal line of an event the catalog lacks: {line}"));
        assert_eq!(target, spec.target, "{line}");
        for name in fields.keys() {
            assert!(
                COMMON_FIELDS.contains(&name.as_str()) || spec.fields.contains(&name.as_str()),
                "{event}.{name} is logged but not in the catalog: {line}"
            );
        }
        for name in spec.fields {
            assert!(fields.contains_key(*name), "{event} lacks {name}: {line}");
        }
        *seen.entry(event.to_owned()).or_insert(0) += 1;
    }
    for event in [
        "queue",
        "deployment",
        "dispatch",
        "sinks",
        "ingest",
        "consumer_lag",
        "severity",
        "deployment_status",
        "redis",
        "verdict",
        "stored",
    ] {
        assert!(
            seen.contains_key(event),
            "no {event} line in the log: {seen:?}"
        );
    }
}
