//! Planted secrets never leave the handler process: not in its logs (stdout, stderr) and
//! not in any response body, on success paths, on garbage, with Redis unreachable, with a
//! wrong Redis password, and when start-up refuses a malformed setting.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use stormgate_shared::testing::redis_server::RedisServer;

const HANDLER: &str = env!("CARGO_BIN_EXE_handler");

const OPENAI_KEY: &str = "PLANTED-openai-key-5d1f0c";
const SERVICENOW_PASSWORD: &str = "PLANTED-snow-pass-77a2e4";
const SEARCH_KEY: &str = "PLANTED-search-key-c0ffee";
const REDIS_PASSWORD: &str = "PLANTED-redis-pass-9b3d11";
const KAFKA_PASSWORD: &str = "PLANTED-kafka-pass-31e8aa";
const INSIGHTS_KEY: &str = "PLANTED-insights-key-4c4c4c";

const PLANTED: [&str; 6] = [
    OPENAI_KEY,
    SERVICENOW_PASSWORD,
    SEARCH_KEY,
    REDIS_PASSWORD,
    KAFKA_PASSWORD,
    INSIGHTS_KEY,
];

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Every secret setting the handler (or the host beside it) is given, each with a planted value.
fn planted_settings(redis_url: &str) -> Vec<(String, String)> {
    let unreachable = format!("https://127.0.0.1:{}", free_port());
    [
        ("STORMGATE_REDIS_URL", redis_url.to_owned()),
        ("AZURE_OPENAI_ENDPOINT", unreachable.clone()),
        ("AZURE_OPENAI_AUTH", "api_key".into()),
        ("AZURE_OPENAI_API_KEY", OPENAI_KEY.into()),
        ("STORMGATE_PREMIUM_DEPLOYMENT", "premium-deployment".into()),
        ("STORMGATE_PREMIUM_MODEL", "premium-model".into()),
        ("STORMGATE_PREMIUM_TPM", "10000".into()),
        ("STORMGATE_PREMIUM_RPM", "60".into()),
        (
            "STORMGATE_STANDARD_DEPLOYMENT",
            "standard-deployment".into(),
        ),
        ("STORMGATE_STANDARD_MODEL", "standard-model".into()),
        ("STORMGATE_STANDARD_TPM", "10000".into()),
        ("STORMGATE_STANDARD_RPM", "60".into()),
        ("SERVICENOW_INSTANCE_URL", unreachable.clone()),
        ("SERVICENOW_USERNAME", "stormgate-writer".into()),
        ("SERVICENOW_PASSWORD", SERVICENOW_PASSWORD.into()),
        ("STORMGATE_SEARCH_ENDPOINT", unreachable),
        ("STORMGATE_SEARCH_INDEX", "incidents".into()),
        ("STORMGATE_SEARCH_API_KEY", SEARCH_KEY.into()),
        ("KAFKA_PASSWORD", KAFKA_PASSWORD.into()),
        (
            "APPLICATIONINSIGHTS_CONNECTION_STRING",
            format!("InstrumentationKey={INSIGHTS_KEY};IngestionEndpoint=https://x/"),
        ),
        // Stricter than production: debug lines must not carry secrets either.
        ("RUST_LOG", "debug".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn assert_no_planted_secret(what: &str, text: &str) {
    for secret in PLANTED {
        assert!(
            !text.contains(secret),
            "{what} contains the planted secret {secret:?}:\n{text}"
        );
    }
}

struct Running {
    child: Child,
    base: String,
}

impl Running {
    fn start(vars: &[(String, String)]) -> Running {
        let port = free_port();
        let child = Command::new(HANDLER)
            .env_clear()
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .env("FUNCTIONS_CUSTOMHANDLER_PORT", port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Running {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// SIGTERM, then everything the process wrote.
    fn stop(mut self) -> String {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "handler ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(25));
        }
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        out
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kafka_batch() -> serde_json::Value {
    let ticket = json!({
        "sys_id": "9d385017c611228701d22104cc95c371", "number": "INC0012345", "sys_mod_count": "4",
        "priority": "2", "state": "2", "short_description": "Fibre cut near agg-017"
    });
    let records = vec![
        json!({"Offset": 1, "Partition": 0, "Topic": "t", "Value": ticket.to_string(), "Headers": []})
            .to_string(),
        json!({"Offset": 2, "Partition": 0, "Topic": "t", "Value": "\u{1}not json", "Headers": []})
            .to_string(),
    ];
    json!({"Data": {"events": serde_json::to_string(&records).unwrap()}, "Metadata": {}})
}

/// Drives every route, valid and garbage, and returns "status body" of each answer.
async fn drive_every_route(base: &str) -> Vec<(String, u16, String)> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get(format!("{base}/")).send().await.is_err() {
        assert!(Instant::now() < deadline, "handler never answered GET /");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let timer = json!({"Data": {"timer": {"IsPastDue": false}}, "Metadata": {}});
    let requests: Vec<(&str, &str, Option<String>)> = vec![
        ("GET", "/", None),
        ("GET", "/api/health", None),
        ("POST", "/classify", Some(kafka_batch().to_string())),
        ("POST", "/classify", Some("\u{1}{{{ garbage".into())),
        ("POST", "/dispatch", Some(timer.to_string())),
        (
            "POST",
            "/summarize-premium",
            Some(json!({"Data": {"handoff": "{\"tier\":\"premium\",\"leases\":[]}"}}).to_string()),
        ),
        ("POST", "/summarize-standard", Some("[]".into())),
        ("POST", "/rollup", Some(timer.to_string())),
        ("GET", "/api/summaries/INC0012345", None),
        ("GET", "/api/regions/north/rollup", None),
        ("GET", "/api/dead-letters", None),
        (
            "POST",
            "/api/dead-letters",
            Some("{\"ids\": [\"x\"]}".into()),
        ),
        ("GET", "/no/such/route", None),
    ];
    let mut answers = Vec::new();
    for (method, path, body) in requests {
        let url = format!("{base}{path}");
        let request = match method {
            "GET" => client.get(url),
            _ => client
                .post(url)
                .header("content-type", "application/json")
                .body(body.unwrap_or_default()),
        };
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        answers.push((format!("{method} {path}"), status, text));
    }
    answers
}

fn check_answers(answers: &[(String, u16, String)]) {
    for (route, status, body) in answers {
        assert_no_planted_secret(&format!("{route} answer ({status})"), body);
    }
}

#[tokio::test]
async fn secrets_stay_out_of_logs_and_bodies_when_redis_is_unreachable() {
    let url = format!("redis://:{REDIS_PASSWORD}@127.0.0.1:{}/", free_port());
    let handler = Running::start(&planted_settings(&url));
    let answers = drive_every_route(&handler.base).await;
    let (_, classify_status, _) = &answers[2];
    assert!(
        *classify_status >= 500,
        "classify with Redis down must fail the invocation: {answers:?}"
    );
    check_answers(&answers);
    let logs = handler.stop();
    assert!(
        logs.contains("invocation failed"),
        "the failures were logged:\n{logs}"
    );
    assert_no_planted_secret("handler logs", &logs);
}

#[tokio::test]
async fn secrets_stay_out_of_logs_and_bodies_when_the_redis_password_is_wrong() {
    let redis = RedisServer::start().expect("redis-server must be installed for this test");
    require_password(redis.port(), "the-real-password");
    let url = format!("redis://:{REDIS_PASSWORD}@127.0.0.1:{}/", redis.port());
    let handler = Running::start(&planted_settings(&url));
    let answers = drive_every_route(&handler.base).await;
    assert!(
        answers[2].1 >= 500,
        "classify with Redis refusing the password must fail: {answers:?}"
    );
    check_answers(&answers);
    let logs = handler.stop();
    assert_no_planted_secret("handler logs", &logs);
}

#[test]
fn start_up_refusals_never_echo_a_secret_value() {
    for (name, value) in [
        (
            "STORMGATE_REDIS_URL",
            format!("http://:{REDIS_PASSWORD}@127.0.0.1:1/"),
        ),
        ("AZURE_OPENAI_API_KEY", String::new()),
        (
            "SERVICENOW_INSTANCE_URL",
            format!("http://admin:{SERVICENOW_PASSWORD}@x"),
        ),
    ] {
        let mut vars = planted_settings("redis://127.0.0.1:1/");
        vars.retain(|(k, _)| k != name);
        if !value.is_empty() {
            vars.push((name.to_owned(), value.clone()));
        }
        let mut child = Command::new(HANDLER)
            .env_clear()
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .env("FUNCTIONS_CUSTOMHANDLER_PORT", free_port().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A value accepted by mistake would leave the handler serving: do not wait forever.
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{name}={value:?} was accepted at start-up");
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name}={value:?} must be refused");
        assert!(stderr.contains(name), "the refusal names {name}: {stderr}");
        assert_no_planted_secret(&format!("start-up refusal of {name}"), &stderr);
        assert_no_planted_secret(
            &format!("start-up stdout ({name})"),
            &String::from_utf8_lossy(&output.stdout),
        );
    }
}

fn require_password(port: u16, password: &str) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .write_all(format!("CONFIG SET requirepass {password}\r\n").as_bytes())
        .unwrap();
    let mut reply = [0u8; 5];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+OK\r\n");
}
