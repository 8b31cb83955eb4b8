//! The real `handler` binary, started as the Functions host starts it: a free port in
//! `FUNCTIONS_CUSTOMHANDLER_PORT`, app settings in the environment, nothing else.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stormgate_handlers::config::Settings;
use stormgate_shared::testing::redis_server::RedisServer;

const HANDLER: &str = env!("CARGO_BIN_EXE_handler");
const INVOCATION_ID: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

/// A running handler, killed if the test fails before stopping it.
struct HandlerProcess {
    child: Child,
    base: String,
}

impl HandlerProcess {
    fn start(extra: &[(&str, &str)]) -> HandlerProcess {
        let port = free_port();
        let child = handler_command(&settings_with(extra))
            .env("FUNCTIONS_CUSTOMHANDLER_PORT", port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        HandlerProcess {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Asks for a graceful stop, as the host does, and returns the exit status and stdout.
    fn terminate(mut self) -> (ExitStatus, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let status = wait_for_exit(&mut self.child, Duration::from_secs(10))
            .expect("handler ignored SIGTERM");
        let mut stdout = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        (status, stdout)
    }
}

impl Drop for HandlerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn settings_with(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = Settings::example_vars()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    vars.retain(|(k, _)| !extra.iter().any(|(name, _)| name == k));
    vars.extend(
        extra
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    vars.push(("RUST_LOG".into(), "info".into()));
    vars
}

/// The handler with exactly `vars` as its environment.
fn handler_command(vars: &[(String, String)]) -> Command {
    let mut command = Command::new(HANDLER);
    command.env_clear().envs(vars.iter().map(|(k, v)| (k, v)));
    command
}

fn wait_for_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    None
}

async fn wait_until_answering(client: &reqwest::Client, base: &str) -> reqwest::Response {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.get(format!("{base}/")).send().await {
            Ok(response) => return response,
            Err(e) if Instant::now() > deadline => panic!("handler never answered GET /: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
}

/// Runs the handler with exactly `vars` until it exits; its exit status and stderr.
fn start_up_failure(vars: &[(String, String)]) -> (ExitStatus, String) {
    let output = handler_command(vars)
        .env("FUNCTIONS_CUSTOMHANDLER_PORT", free_port().to_string())
        .output()
        .unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn handler_serves_the_host_rejects_garbage_and_stays_up() {
    let redis = RedisServer::start().unwrap();
    let redis_url = redis.url();
    let mut handler = HandlerProcess::start(&[("STORMGATE_REDIS_URL", &redis_url)]);
    let client = reqwest::Client::new();
    let root = wait_until_answering(&client, &handler.base).await;
    assert!(root.status().is_success());

    let garbage = client
        .post(format!("{}/classify", handler.base))
        .header("X-Azure-Functions-InvocationId", INVOCATION_ID)
        .body("\u{1}{{{ this is not an invocation")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), 400);
    let body: Value = garbage.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("invocation body")),
        "{body}"
    );
    assert!(
        handler.is_running(),
        "garbage must not take the process down"
    );

    let records = vec![
        json!({"Offset": 1, "Partition": 0, "Topic": "t", "Timestamp": "2026-11-29T10:00:00Z", "Key": null,
               "Value": "{\"sys_id\":\"a\"}",
               // table_name: incident (base64): a malformed incident, not a foreign record.
               "Headers": [{"Key": "table_name", "Value": "aW5jaWRlbnQ="}]})
        .to_string(),
    ];
    let batch =
        json!({"Data": {"events": serde_json::to_string(&records).unwrap()}, "Metadata": {}});
    let response = client
        .post(format!("{}/classify", handler.base))
        .json(&batch)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    // Without a reachable Redis nothing can be stored, so the invocation must fail (503,
    // the host marks it failed) without naming the dependency's details; with one, the
    // malformed event is dead-lettered and the batch answers its counts.
    if status == 503 {
        assert_eq!(body, json!({"error": "a dependency is unavailable"}));
    } else {
        assert!(status.is_success(), "{status} {body}");
        assert_eq!(body["ReturnValue"]["dead_lettered"], 1, "{body}");
    }

    let health = client
        .get(format!("{}/api/health", handler.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert!(handler.is_running());

    let (status, stdout) = handler.terminate();
    assert!(status.success(), "graceful shutdown exits 0, got {status}");
    let tagged = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .any(|line| line["span"]["invocation_id"] == INVOCATION_ID);
    assert!(
        tagged,
        "no JSON log line carried the invocation id:\n{stdout}"
    );
}

#[test]
fn start_up_without_a_required_setting_exits_non_zero_naming_it() {
    let mut vars = settings_with(&[]);
    vars.retain(|(k, _)| k != "STORMGATE_STANDARD_TPM");
    let (status, stderr) = start_up_failure(&vars);
    assert!(!status.success());
    assert!(stderr.contains("STORMGATE_STANDARD_TPM"), "{stderr}");
}

#[test]
fn start_up_with_an_unresolved_key_vault_reference_exits_naming_the_setting() {
    let vars = settings_with(&[(
        "STORMGATE_REDIS_URL",
        "@Microsoft.KeyVault(VaultName=v;SecretName=redis-url)",
    )]);
    let (status, stderr) = start_up_failure(&vars);
    assert!(!status.success());
    assert!(
        stderr.contains("STORMGATE_REDIS_URL") && stderr.contains("@Microsoft.KeyVault"),
        "{stderr}"
    );
}
