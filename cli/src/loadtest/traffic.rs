//! Traffic against `/classify`: a closed loop (fixed concurrency, as fast as the
//! handler answers) to find saturation, and an open loop (requests sent on a fixed
//! schedule whatever the answers) to measure latency at a given rate. Open-loop latency
//! is counted from each request's scheduled instant, so a slow answer delays nothing
//! and hides nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::batches::BatchTemplate;

/// Posts batches; the serial makes every batch's tickets new.
#[derive(Clone)]
pub struct Target {
    pub client: reqwest::Client,
    pub url: String,
    pub template: Arc<BatchTemplate>,
    pub next_serial: Arc<AtomicU32>,
}

/// One answered request.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub latency: Duration,
    pub accepted: u64,
}

impl Target {
    pub fn new(port: u16, template: BatchTemplate) -> anyhow::Result<Self> {
        Ok(Target {
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()?,
            url: format!("http://127.0.0.1:{port}/classify"),
            template: Arc::new(template),
            next_serial: Arc::new(AtomicU32::new(0)),
        })
    }

    /// Posts one new batch; the latency counts from `since`.
    pub async fn post(&self, since: Instant) -> anyhow::Result<Answer> {
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        let body = self.template.body(serial);
        let response = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header(
                "x-azure-functions-invocationid",
                format!("loadtest-{serial}"),
            )
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        let latency = since.elapsed();
        if !status.is_success() {
            bail!(
                "/classify answered {status}: {}",
                text.chars().take(300).collect::<String>()
            );
        }
        let answer: Value = serde_json::from_str(&text).context("/classify answer is not JSON")?;
        let accepted = answer["ReturnValue"]["accepted"].as_u64().unwrap_or(0);
        Ok(Answer { latency, accepted })
    }
}

/// What a run of requests produced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStats {
    pub requests: u64,
    pub failed: u64,
    /// Scheduled requests not sent because too many were still in flight (open loop).
    pub shed: u64,
    pub tickets_accepted: u64,
    pub wall_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    #[serde(skip)]
    pub first_error: Option<String>,
}

impl RunStats {
    fn from_answers(answers: Vec<anyhow::Result<Answer>>, shed: u64, wall: Duration) -> RunStats {
        let mut latencies = Vec::with_capacity(answers.len());
        let mut stats = RunStats {
            shed,
            wall_s: wall.as_secs_f64(),
            ..RunStats::default()
        };
        for answer in answers {
            stats.requests += 1;
            match answer {
                Ok(a) => {
                    latencies.push(a.latency);
                    stats.tickets_accepted += a.accepted;
                }
                Err(e) => {
                    stats.failed += 1;
                    stats.first_error.get_or_insert_with(|| format!("{e:#}"));
                }
            }
        }
        latencies.sort_unstable();
        let ms = |d: Option<&Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
        let at = |q: f64| {
            latencies.get(((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1))
        };
        stats.p50_ms = ms(at(0.50));
        stats.p99_ms = ms(at(0.99));
        stats.max_ms = ms(latencies.last());
        stats
    }

    pub fn tickets_per_s(&self) -> f64 {
        self.tickets_accepted as f64 / self.wall_s
    }

    pub fn requests_per_s(&self) -> f64 {
        (self.requests - self.failed) as f64 / self.wall_s
    }
}

/// `concurrency` workers post `batches` batches back to back.
pub async fn closed_loop(target: &Target, batches: u64, concurrency: usize) -> RunStats {
    let remaining = Arc::new(AtomicU32::new(u32::try_from(batches).unwrap_or(u32::MAX)));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..concurrency {
        let (target, remaining) = (target.clone(), remaining.clone());
        workers.spawn(async move {
            let mut answers = Vec::new();
            while remaining
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                answers.push(target.post(Instant::now()).await);
            }
            answers
        });
    }
    let mut answers = Vec::new();
    while let Some(done) = workers.join_next().await {
        answers.extend(done.unwrap_or_default());
    }
    RunStats::from_answers(answers, 0, started.elapsed())
}

/// `count` batches at `per_s` batches a second on a fixed schedule; a request due
/// while `max_in_flight` are outstanding is shed and counted.
pub async fn open_loop(target: &Target, per_s: f64, count: u64, max_in_flight: usize) -> RunStats {
    let interval = Duration::from_secs_f64(1.0 / per_s);
    let slots = Arc::new(Semaphore::new(max_in_flight));
    let started = Instant::now();
    let mut calls = JoinSet::new();
    let mut shed = 0;
    for i in 0..count {
        let due = started + interval.mul_f64(i as f64);
        tokio::time::sleep_until(due.into()).await;
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            shed += 1;
            continue;
        };
        let target = target.clone();
        calls.spawn(async move {
            let answer = target.post(due).await;
            drop(slot);
            answer
        });
    }
    let mut answers = Vec::new();
    while let Some(done) = calls.join_next().await {
        if let Ok(answer) = done {
            answers.push(answer);
        }
    }
    RunStats::from_answers(answers, shed, started.elapsed())
}
