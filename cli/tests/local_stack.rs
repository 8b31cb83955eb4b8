//! `stormgate local` end to end: the real `stormgate` and `handler` binaries (this
//! profile's builds), a real `redis-server`, the simulator and the host emulation.
//!
//! The smoke run plays the first 20 minutes of `scenarios/smoke.toml` (ten quiet, ten
//! of a storm with outages) at 20×, about a minute, and checks what the run left in the system:
//! every ticket has its final summaries in the read API, no HTTP 429, every customer
//! job's ticket version named by a published notice, and no process left running. The
//! second test stops a run with Ctrl-C (SIGINT) in the middle and checks that every
//! process it started is gone.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const STORMGATE: &str = env!("CARGO_BIN_EXE_stormgate");
const HANDLER: &str = env!("CARGO_BIN_EXE_handler-for-cli-tests");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "stormgate-local-test-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `stormgate local` with `args`, its output read line by line on a channel.
fn start(args: &[&str], dir: &Path) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(STORMGATE)
        .arg("local")
        .args(["--handler", HANDLER])
        .args(["--dir", dir.join("logs").to_str().unwrap()])
        .args(["--html", dir.join("report.html").to_str().unwrap()])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stormgate local");
    let (tx, rx) = mpsc::channel();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    (child, rx)
}

/// The pid printed on the line starting with `prefix` ("handler pid 123 at ...").
fn pid_on(lines: &[String], prefix: &str) -> u32 {
    let line = lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{}", lines.join("\n")));
    line[prefix.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next());
            !matches!(state, Some("Z" | "X") | None)
        })
        .unwrap_or(false)
}

/// Waits for the child to exit within `limit`, collecting its output.
fn wait(
    child: &mut Child,
    rx: &mpsc::Receiver<String>,
    lines: &mut Vec<String>,
    limit: Duration,
) -> i32 {
    let started = Instant::now();
    loop {
        while let Ok(line) = rx.try_recv() {
            lines.push(line);
        }
        if let Some(status) = child.try_wait().unwrap() {
            std::thread::sleep(Duration::from_millis(200));
            while let Ok(line) = rx.try_recv() {
                lines.push(line);
            }
            return status.code().unwrap_or(-1);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!(
                "stormgate local did not end within {limit:?}:\n{}",
                lines.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_short_storm_through_the_real_functions_settles_every_ticket_without_a_429_and_leaves_nothing_running()
 {
    let dir = scratch("smoke");
    let scenario = repo().join("scenarios/smoke.toml");
    let (json, verdict) = (dir.join("report.json"), dir.join("verdict.json"));
    let (mut child, rx) = start(
        &[
            "--scenario",
            scenario.to_str().unwrap(),
            // The quiet start and the first ten minutes of the storm: enough for its
            // outages and their grouped notices, in about a minute of real time.
            "--minutes",
            "20",
            "--speed",
            "20",
            "--json",
            json.to_str().unwrap(),
            "--verdict",
            verdict.to_str().unwrap(),
        ],
        &dir,
    );
    let mut lines = Vec::new();
    let code = wait(&mut child, &rx, &mut lines, Duration::from_secs(600));
    let output = lines.join("\n");
    assert_eq!(code, 0, "stormgate local failed:\n{output}");

    let verdict: Value = serde_json::from_str(&std::fs::read_to_string(&verdict).unwrap()).unwrap();
    let tickets = verdict["tickets"].as_u64().unwrap();
    assert!(tickets > 100, "a storm's worth of tickets: {verdict}");
    assert_eq!(
        verdict["tickets_without_summary"],
        serde_json::json!([]),
        "{verdict}"
    );
    assert_eq!(
        verdict["unsettled_jobs"],
        serde_json::json!([]),
        "{verdict}"
    );
    assert!(verdict["customer_jobs"].as_u64().unwrap() > 0, "{verdict}");
    assert_eq!(
        verdict["customer_notices_missing"],
        serde_json::json!([]),
        "{verdict}"
    );
    // Notices are per outage: fewer notices than customer jobs.
    assert!(
        verdict["notices_published"].as_u64().unwrap() < verdict["customer_jobs"].as_u64().unwrap(),
        "{verdict}"
    );
    assert_eq!(verdict["http_429"], 0, "{verdict}");
    assert_eq!(verdict["poisoned_messages"], 0, "{verdict}");
    assert_eq!(
        verdict["processes_left_running"],
        serde_json::json!([]),
        "{verdict}"
    );

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let local = &report["policies"][0];
    assert_eq!(local["name"], "local");
    assert_eq!(local["tickets"].as_u64(), Some(tickets));
    assert_eq!(local["http_429"], 0);
    assert_eq!(local["summaries"]["none"], 0, "{local}");
    assert!(local["llm_calls"].as_u64().unwrap() > 0);
    assert!(
        output.contains("minute   1:"),
        "a live line per minute:\n{output}"
    );

    for name in ["redis-server pid ", "handler pid "] {
        let pid = pid_on(&lines, name);
        assert!(!running(pid), "{name}{pid} is still running");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctrl_c_stops_every_process_the_run_started() {
    let dir = scratch("ctrl-c");
    let (mut child, rx) = start(&["--minutes", "60"], &dir);
    let mut lines = Vec::new();
    let started = Instant::now();
    while !lines
        .iter()
        .any(|l: &String| l.starts_with("Functions host emulation"))
    {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => lines.push(line),
            Err(_) => panic!("the stack did not come up:\n{}", lines.join("\n")),
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{}",
            lines.join("\n")
        );
    }
    let pids = [
        pid_on(&lines, "redis-server pid "),
        pid_on(&lines, "handler pid "),
    ];
    assert!(
        pids.iter().all(|p| running(*p)),
        "both processes run before the stop"
    );
    // Let the host deliver something first.
    std::thread::sleep(Duration::from_secs(3));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = wait(&mut child, &rx, &mut lines, Duration::from_secs(60));
    assert_eq!(code, 130, "interrupted:\n{}", lines.join("\n"));
    for pid in pids {
        assert!(
            !running(pid),
            "pid {pid} is still running:\n{}",
            lines.join("\n")
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("processes left running: []")),
        "{}",
        lines.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An operator's rehearsal: their own Redis and their own Azure OpenAI endpoint (here a
/// redis-server and a simulator this test starts, reached only through the options a
/// real deployment would use: a URL, an endpoint, the auth settings and a key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_against_a_given_redis_and_openai_endpoint_uses_them_and_starts_neither() {
    use stormgate_lab::simulator::{DeploymentConfig, SimulatorConfig};
    use stormgate_lab::simulator_http::spawn_simulator;
    use stormgate_shared::testing::redis_server::RedisServer;

    let redis = RedisServer::start().unwrap();
    let simulator = spawn_simulator(SimulatorConfig::new(
        7,
        vec![
            DeploymentConfig::new("premium", "gpt-4o", 2_000_000),
            DeploymentConfig::new("standard", "gpt-4o-mini", 2_000_000),
        ],
    ))
    .await
    .unwrap();
    let key = simulator.core().api_key().to_owned();
    let dir = scratch("given");
    let verdict = dir.join("verdict.json");
    let scenario = repo().join("scenarios/smoke.toml");
    let (api_key, auth) = (
        format!("AZURE_OPENAI_API_KEY={key}"),
        "AZURE_OPENAI_AUTH=api_key".to_owned(),
    );
    let args: Vec<String> = [
        "--scenario",
        scenario.to_str().unwrap(),
        "--minutes",
        "10",
        "--speed",
        "20",
        "--redis",
        &redis.url(),
        "--openai-endpoint",
        &simulator.endpoint(),
        "--set",
        &auth,
        "--set",
        &api_key,
        "--verdict",
        verdict.to_str().unwrap(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let output = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (mut child, rx) = start(&refs, &dir);
        let mut lines = Vec::new();
        let code = wait(&mut child, &rx, &mut lines, Duration::from_secs(300));
        (code, lines)
    })
    .await
    .unwrap();
    let (code, lines) = output;
    let text = lines.join("\n");
    assert_eq!(code, 0, "{text}");
    assert!(
        !text.contains("redis-server pid"),
        "no redis-server of its own:\n{text}"
    );
    assert!(
        !text.contains("simulator at"),
        "no simulator of its own:\n{text}"
    );
    let verdict: Value = serde_json::from_str(&std::fs::read_to_string(&verdict).unwrap()).unwrap();
    assert!(verdict["tickets"].as_u64().unwrap() > 10, "{verdict}");
    assert_eq!(
        verdict["unsettled_jobs"],
        serde_json::json!([]),
        "{verdict}"
    );
    let calls: u64 = ["premium", "standard"]
        .iter()
        .map(|d| simulator.core().stats(d).unwrap().requests)
        .sum();
    assert!(calls > 0, "the given endpoint served the run's calls");
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: u64 = redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap();
    assert!(keys > 0, "the run kept its state in the given Redis");
}

#[test]
fn ctrl_c_during_start_up_still_stops_what_was_started() {
    let dir = scratch("ctrl-c-early");
    let (mut child, rx) = start(&["--minutes", "60"], &dir);
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.starts_with("redis-server pid "))
    {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => lines.push(line),
            Err(_) => panic!("redis-server never started:\n{}", lines.join("\n")),
        }
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = wait(&mut child, &rx, &mut lines, Duration::from_secs(60));
    assert_eq!(code, 130, "interrupted:\n{}", lines.join("\n"));
    let mut pids = vec![pid_on(&lines, "redis-server pid ")];
    if lines.iter().any(|l| l.starts_with("handler pid ")) {
        pids.push(pid_on(&lines, "handler pid "));
    }
    for pid in pids {
        assert!(
            !running(pid),
            "pid {pid} is still running:\n{}",
            lines.join("\n")
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
