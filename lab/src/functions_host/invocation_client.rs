//! How the host reaches the handler: `POST {base}/{function}` with an invocation
//! payload, and `GET` for forwarded HTTP routes. An answer that never came (the
//! instance died, was not listening, or ran past `functionTimeout`) is a failed
//! invocation like any non-2xx.

use std::time::Duration;

use serde_json::Value;

/// What an instance answered; `status` is `None` when it never answered.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: Option<u16>,
    pub body: Value,
}

impl Answer {
    pub fn is_success(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// The invocation's `ReturnValue`.
    pub fn return_value(&self) -> &Value {
        &self.body["ReturnValue"]
    }

    fn none() -> Answer {
        Answer {
            status: None,
            body: Value::Null,
        }
    }
}

/// The host's HTTP client towards one app's instances.
#[derive(Debug, Clone)]
pub struct InvocationClient {
    http: reqwest::Client,
}

impl InvocationClient {
    /// `timeout` is the app's `functionTimeout`.
    pub fn new(timeout: Duration) -> InvocationClient {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .unwrap_or_default();
        InvocationClient { http }
    }

    /// `POST {base}/{function}` with an invocation payload, under a new invocation id
    /// (the header the host sets, which the handler's log lines carry).
    pub async fn invoke(&self, base: &str, function: &str, body: &Value) -> Answer {
        let request = self
            .http
            .post(format!("{base}/{function}"))
            .header(
                stormgate_handlers::app::INVOCATION_ID_HEADER,
                invocation_id(),
            )
            .json(body);
        answer(request).await
    }

    /// `GET {base}{path}`: a forwarded HTTP trigger (`/api/...`).
    pub async fn get(&self, base: &str, path: &str) -> Answer {
        answer(self.http.get(format!("{base}{path}"))).await
    }
}

/// A random GUID, as the host's invocation ids are.
fn invocation_id() -> String {
    let n: u128 = rand::random();
    let hex = format!("{n:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

async fn answer(request: reqwest::RequestBuilder) -> Answer {
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.json().await.unwrap_or(Value::Null);
            Answer {
                status: Some(status),
                body,
            }
        }
        Err(_) => Answer::none(),
    }
}
