//! The app as the Functions host loads it: `host.json` and one `function.json` per
//! function folder, parsed into typed values (triggers, outputs, retry policies, the
//! queue and Kafka extension settings). The host emulation reads these instead of
//! restating them, so a change to `function-defs/` or `host.json` changes what the
//! emulation does.
//!
//! Defaults for settings `host.json` leaves out are the platform's own
//! (`tests/fixtures/platform/functions_host.json` records them with their origin):
//! queues `batchSize` 16, `newBatchThreshold` half the batch size, `maxDequeueCount` 5,
//! `visibilityTimeout` 0, `maxPollingInterval` one minute; Kafka `maxBatchSize` 64,
//! `subscriberIntervalInSeconds` 1; `functionTimeout` five minutes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::ncrontab::{NcrontabSchedule, ScheduleError};
use super::retry_policy::{
    RetryPolicy, SMALLEST_MAX_RETRY_COUNT, STRATEGIES, UNLIMITED_MAX_RETRY_COUNT,
};

/// The folders of `function-defs/` this build carries, with their `function.json`
/// texts: what `cargo xtask dist` ships next to this build's handler. A test checks the
/// list against the folders on disk.
const BUILT_IN_FUNCTIONS: [(&str, &str); 13] = [
    (
        "classify",
        include_str!("../../../function-defs/classify/function.json"),
    ),
    (
        "console",
        include_str!("../../../function-defs/console/function.json"),
    ),
    (
        "controls",
        include_str!("../../../function-defs/controls/function.json"),
    ),
    (
        "dead-letters",
        include_str!("../../../function-defs/dead-letters/function.json"),
    ),
    (
        "dispatch",
        include_str!("../../../function-defs/dispatch/function.json"),
    ),
    (
        "health",
        include_str!("../../../function-defs/health/function.json"),
    ),
    (
        "region-rollup",
        include_str!("../../../function-defs/region-rollup/function.json"),
    ),
    (
        "rollup",
        include_str!("../../../function-defs/rollup/function.json"),
    ),
    (
        "series",
        include_str!("../../../function-defs/series/function.json"),
    ),
    (
        "status",
        include_str!("../../../function-defs/status/function.json"),
    ),
    (
        "summaries",
        include_str!("../../../function-defs/summaries/function.json"),
    ),
    (
        "summarize-premium",
        include_str!("../../../function-defs/summarize-premium/function.json"),
    ),
    (
        "summarize-standard",
        include_str!("../../../function-defs/summarize-standard/function.json"),
    ),
];
const BUILT_IN_HOST_JSON: &str = include_str!("../../../host.json");

/// The names of the built-in function folders, for the test that compares them with
/// `function-defs/`.
pub fn built_in_function_names() -> Vec<&'static str> {
    BUILT_IN_FUNCTIONS.iter().map(|(name, _)| *name).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("{file} is not valid JSON: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    #[error("{file}: schedule {schedule:?}: {source}")]
    Schedule {
        file: String,
        schedule: String,
        source: ScheduleError,
    },
}

/// `host.json` settings the emulation honours.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSettings {
    /// `functionTimeout`: an invocation still running after this has failed.
    pub function_timeout: Duration,
    pub queues: QueueSettings,
    pub kafka: KafkaSettings,
}

/// `extensions.queues`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    /// Messages fetched at once, run concurrently.
    pub batch_size: u32,
    /// When the messages still running fall to this many, the next batch is fetched.
    pub new_batch_threshold: u32,
    /// A message whose invocation failed this many times goes to `<queue>-poison`.
    pub max_dequeue_count: u32,
    /// How long a failed message stays invisible before it is delivered again.
    pub visibility_timeout: Duration,
    /// The longest wait between polls of an empty queue.
    pub max_polling_interval: Duration,
}

impl Default for HostSettings {
    /// The platform's defaults: what an empty `host.json` means.
    fn default() -> Self {
        HostSettings {
            function_timeout: Duration::from_secs(300),
            queues: QueueSettings {
                batch_size: 16,
                new_batch_threshold: 8,
                max_dequeue_count: 5,
                visibility_timeout: Duration::ZERO,
                max_polling_interval: Duration::from_secs(60),
            },
            kafka: KafkaSettings {
                max_batch_size: 64,
                subscriber_interval: Duration::from_secs(1),
            },
        }
    }
}

/// `extensions.kafka`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KafkaSettings {
    /// Records in one `cardinality: many` invocation at most.
    pub max_batch_size: usize,
    /// The wait between polls of a topic with nothing new.
    pub subscriber_interval: Duration,
}

/// What starts a function.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// Forwarded HTTP (`/api/<route>`); the emulation does not drive these.
    Http {
        route: String,
    },
    Timer {
        binding: String,
        /// Boxed: a parsed schedule is large beside the other triggers.
        schedule: Box<NcrontabSchedule>,
        run_on_startup: bool,
    },
    Queue {
        binding: String,
        queue: String,
    },
    /// `topic` as written (`%KAFKA_TOPIC%`): resolve it with [`resolve_setting`].
    Kafka {
        binding: String,
        topic: String,
        many: bool,
    },
}

/// Where an output binding's values go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Queue {
        binding: String,
        queue: String,
    },
    /// `topic` as written (`%KAFKA_NOTIFICATIONS_TOPIC%`).
    Kafka {
        binding: String,
        topic: String,
    },
    Http {
        binding: String,
    },
}

impl Output {
    pub fn binding(&self) -> &str {
        match self {
            Output::Queue { binding, .. }
            | Output::Kafka { binding, .. }
            | Output::Http { binding } => binding,
        }
    }
}

/// One function folder.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionDefinition {
    pub name: String,
    pub trigger: Trigger,
    pub outputs: Vec<Output>,
    /// The function-level `retry` policy, if any.
    pub retry: Option<RetryPolicy>,
}

/// `host.json` and every function.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppDefinition {
    pub host: HostSettings,
    pub functions: BTreeMap<String, FunctionDefinition>,
}

impl AppDefinition {
    /// The definitions this build was made with (`function-defs/` and `host.json` of
    /// its source tree).
    pub fn built_in() -> Result<AppDefinition, DefinitionError> {
        let host = parse_host(BUILT_IN_HOST_JSON, "host.json")?;
        let mut functions = BTreeMap::new();
        for (name, text) in BUILT_IN_FUNCTIONS {
            let file = format!("function-defs/{name}/function.json");
            functions.insert(name.to_owned(), parse_function(name, text, &file)?);
        }
        Ok(AppDefinition { host, functions })
    }

    /// Reads an app root: `host.json` beside either a `function-defs/` folder (the
    /// repository) or the function folders themselves (`cargo xtask dist`'s layout).
    pub fn load(root: &Path) -> Result<AppDefinition, DefinitionError> {
        let host_path = root.join("host.json");
        let host = parse_host(&read(&host_path)?, &host_path.display().to_string())?;
        let defs = root.join("function-defs");
        let folder_root = if defs.is_dir() { defs } else { root.to_owned() };
        let entries = std::fs::read_dir(&folder_root).map_err(|e| DefinitionError::Read {
            path: folder_root.display().to_string(),
            message: e.to_string(),
        })?;
        let mut functions = BTreeMap::new();
        for entry in entries.flatten() {
            let path: PathBuf = entry.path().join("function.json");
            if !path.is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let file = path.display().to_string();
            functions.insert(name.clone(), parse_function(&name, &read(&path)?, &file)?);
        }
        if functions.is_empty() {
            return Err(DefinitionError::Invalid {
                file: folder_root.display().to_string(),
                message: "no function folder with a function.json".into(),
            });
        }
        Ok(AppDefinition { host, functions })
    }

    pub fn function(&self, name: &str) -> Option<&FunctionDefinition> {
        self.functions.get(name)
    }

    /// The function whose queue trigger reads `queue`.
    pub fn consumer_of(&self, queue: &str) -> Option<&FunctionDefinition> {
        self.functions
            .values()
            .find(|f| matches!(&f.trigger, Trigger::Queue { queue: q, .. } if q == queue))
    }

    /// The queue a queue-triggered function reads.
    pub fn queue_of(&self, function: &str) -> Option<&str> {
        match &self.function(function)?.trigger {
            Trigger::Queue { queue, .. } => Some(queue),
            _ => None,
        }
    }

    /// Every Kafka output binding name of the app (the notifications topic's).
    pub fn kafka_output_bindings(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .functions
            .values()
            .flat_map(|f| f.outputs.iter())
            .filter(|o| matches!(o, Output::Kafka { .. }))
            .map(Output::binding)
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// `%NAME%` replaced by the app setting `NAME` (unchanged when there is none), as the
/// host resolves binding expressions.
pub fn resolve_setting(value: &str, settings: &BTreeMap<String, String>) -> String {
    match value
        .strip_prefix('%')
        .and_then(|rest| rest.strip_suffix('%'))
    {
        Some(name) => settings
            .get(name)
            .cloned()
            .unwrap_or_else(|| value.to_owned()),
        None => value.to_owned(),
    }
}

fn read(path: &Path) -> Result<String, DefinitionError> {
    std::fs::read_to_string(path).map_err(|e| DefinitionError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawHost {
    #[serde(default)]
    function_timeout: Option<String>,
    #[serde(default)]
    extensions: RawExtensions,
}

#[derive(Debug, Default, Deserialize)]
struct RawExtensions {
    #[serde(default)]
    queues: RawQueues,
    #[serde(default)]
    kafka: RawKafka,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawQueues {
    batch_size: Option<u32>,
    new_batch_threshold: Option<u32>,
    max_dequeue_count: Option<u32>,
    visibility_timeout: Option<Value>,
    max_polling_interval: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawKafka {
    max_batch_size: Option<usize>,
    subscriber_interval_in_seconds: Option<u64>,
}

/// The platform's limit on `batchSize`.
pub const MAX_QUEUE_BATCH_SIZE: u32 = 32;

fn parse_host(text: &str, file: &str) -> Result<HostSettings, DefinitionError> {
    let raw: RawHost = serde_json::from_str(text).map_err(|e| DefinitionError::Syntax {
        file: file.to_owned(),
        message: e.to_string(),
    })?;
    let invalid = |message: String| DefinitionError::Invalid {
        file: file.to_owned(),
        message,
    };
    let function_timeout = match raw.function_timeout {
        Some(t) => timespan(&t).ok_or_else(|| invalid(format!("functionTimeout {t:?}")))?,
        None => Duration::from_secs(300),
    };
    let q = raw.extensions.queues;
    let batch_size = q.batch_size.unwrap_or(16);
    if batch_size == 0 || batch_size > MAX_QUEUE_BATCH_SIZE {
        return Err(invalid(format!(
            "queues.batchSize {batch_size} is outside 1..={MAX_QUEUE_BATCH_SIZE}"
        )));
    }
    let duration = |v: Option<Value>, name: &str, default: Duration| match v {
        None => Ok(default),
        // A number is milliseconds (the host's older form); a string is a TimeSpan.
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Duration::from_millis)
            .ok_or_else(|| invalid(format!("queues.{name} {n}"))),
        Some(Value::String(s)) => {
            timespan(&s).ok_or_else(|| invalid(format!("queues.{name} {s:?}")))
        }
        Some(other) => Err(invalid(format!("queues.{name} {other}"))),
    };
    let queues = QueueSettings {
        batch_size,
        new_batch_threshold: q.new_batch_threshold.unwrap_or(batch_size / 2),
        max_dequeue_count: q.max_dequeue_count.unwrap_or(5).max(1),
        visibility_timeout: duration(q.visibility_timeout, "visibilityTimeout", Duration::ZERO)?,
        max_polling_interval: duration(
            q.max_polling_interval,
            "maxPollingInterval",
            Duration::from_secs(60),
        )?,
    };
    let k = raw.extensions.kafka;
    let kafka = KafkaSettings {
        max_batch_size: k.max_batch_size.unwrap_or(64).max(1),
        subscriber_interval: Duration::from_secs(k.subscriber_interval_in_seconds.unwrap_or(1)),
    };
    Ok(HostSettings {
        function_timeout,
        queues,
        kafka,
    })
}

#[derive(Debug, Deserialize)]
struct RawFunction {
    bindings: Vec<RawBinding>,
    #[serde(default)]
    retry: Option<RawRetry>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBinding {
    #[serde(rename = "type")]
    kind: String,
    direction: String,
    name: String,
    schedule: Option<String>,
    run_on_startup: Option<bool>,
    queue_name: Option<String>,
    topic: Option<String>,
    route: Option<String>,
    cardinality: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRetry {
    strategy: String,
    max_retry_count: i64,
    delay_interval: Option<String>,
    minimum_interval: Option<String>,
    maximum_interval: Option<String>,
}

fn parse_function(
    name: &str,
    text: &str,
    file: &str,
) -> Result<FunctionDefinition, DefinitionError> {
    let raw: RawFunction = serde_json::from_str(text).map_err(|e| DefinitionError::Syntax {
        file: file.to_owned(),
        message: e.to_string(),
    })?;
    let invalid = |message: String| DefinitionError::Invalid {
        file: file.to_owned(),
        message,
    };
    let mut trigger = None;
    let mut outputs = Vec::new();
    for b in raw.bindings {
        let missing = |field: &str| invalid(format!("binding {:?} has no {field}", b.name));
        match (b.kind.as_str(), b.direction.as_str()) {
            (kind, "in") if kind.ends_with("Trigger") => {
                if trigger.is_some() {
                    return Err(invalid("more than one trigger".into()));
                }
                trigger = Some(match kind {
                    "httpTrigger" => Trigger::Http {
                        route: b.route.clone().unwrap_or_else(|| name.to_owned()),
                    },
                    "timerTrigger" => {
                        let text = b.schedule.clone().ok_or_else(|| missing("schedule"))?;
                        let schedule =
                            text.parse::<NcrontabSchedule>()
                                .map(Box::new)
                                .map_err(|source| DefinitionError::Schedule {
                                    file: file.to_owned(),
                                    schedule: text.clone(),
                                    source,
                                })?;
                        Trigger::Timer {
                            binding: b.name.clone(),
                            schedule,
                            run_on_startup: b.run_on_startup.unwrap_or(false),
                        }
                    }
                    "queueTrigger" => Trigger::Queue {
                        binding: b.name.clone(),
                        queue: b.queue_name.clone().ok_or_else(|| missing("queueName"))?,
                    },
                    "kafkaTrigger" => Trigger::Kafka {
                        binding: b.name.clone(),
                        topic: b.topic.clone().ok_or_else(|| missing("topic"))?,
                        many: b
                            .cardinality
                            .as_deref()
                            .is_some_and(|c| c.eq_ignore_ascii_case("many")),
                    },
                    other => {
                        return Err(invalid(format!("trigger type {other:?} is not emulated")));
                    }
                });
            }
            ("queue", "out") => outputs.push(Output::Queue {
                binding: b.name.clone(),
                queue: b.queue_name.clone().ok_or_else(|| missing("queueName"))?,
            }),
            ("kafka", "out") => outputs.push(Output::Kafka {
                binding: b.name.clone(),
                topic: b.topic.clone().ok_or_else(|| missing("topic"))?,
            }),
            ("http", "out") => outputs.push(Output::Http {
                binding: b.name.clone(),
            }),
            (kind, direction) => {
                return Err(invalid(format!(
                    "binding {:?}: {kind} {direction} is not emulated",
                    b.name
                )));
            }
        }
    }
    let trigger = trigger.ok_or_else(|| invalid("no trigger".into()))?;
    let retry = match raw.retry {
        None => None,
        Some(r) => Some(retry_policy(&r).map_err(invalid)?),
    };
    Ok(FunctionDefinition {
        name: name.to_owned(),
        trigger,
        outputs,
        retry,
    })
}

fn retry_policy(raw: &RawRetry) -> Result<RetryPolicy, String> {
    let max_retries = match raw.max_retry_count {
        UNLIMITED_MAX_RETRY_COUNT => None,
        n if n >= SMALLEST_MAX_RETRY_COUNT => {
            Some(u32::try_from(n).map_err(|_| format!("maxRetryCount {n}"))?)
        }
        n => {
            return Err(format!(
                "maxRetryCount {n} (at least {SMALLEST_MAX_RETRY_COUNT})"
            ));
        }
    };
    let interval = |v: &Option<String>, name: &str| {
        let text = v.as_deref().ok_or_else(|| format!("retry has no {name}"))?;
        timespan(text).ok_or_else(|| format!("retry {name} {text:?} is not hh:mm:ss"))
    };
    match raw.strategy.as_str() {
        "fixedDelay" => Ok(RetryPolicy::FixedDelay {
            max_retries,
            delay: interval(&raw.delay_interval, "delayInterval")?,
        }),
        "exponentialBackoff" => {
            let minimum = interval(&raw.minimum_interval, "minimumInterval")?;
            let maximum = interval(&raw.maximum_interval, "maximumInterval")?;
            if minimum > maximum {
                return Err("retry minimumInterval exceeds maximumInterval".into());
            }
            Ok(RetryPolicy::ExponentialBackoff {
                max_retries,
                minimum,
                maximum,
            })
        }
        other => Err(format!(
            "retry strategy {other:?} (one of {})",
            STRATEGIES.join(", ")
        )),
    }
}

/// A .NET `TimeSpan` as host.json writes it: `[d.]hh:mm:ss[.fffffff]`.
pub fn timespan(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (days, rest) = match text.split_once('.') {
        Some((d, rest)) if !d.contains(':') => (d.parse::<u64>().ok()?, rest),
        _ => (0, text),
    };
    let mut parts = rest.split(':');
    let hours: u64 = parts.next()?.parse().ok()?;
    let minutes: u64 = parts.next()?.parse().ok()?;
    let seconds_text = parts.next()?;
    if parts.next().is_some() || hours > 23 || minutes > 59 {
        return None;
    }
    let (whole, fraction) = match seconds_text.split_once('.') {
        Some((w, f)) => (w, f),
        None => (seconds_text, ""),
    };
    let seconds: u64 = whole.parse().ok()?;
    if seconds > 59 || !fraction.chars().all(|c| c.is_ascii_digit()) || fraction.len() > 7 {
        return None;
    }
    let nanos = if fraction.is_empty() {
        0
    } else {
        let padded = format!("{fraction:0<9}");
        padded.parse::<u32>().ok()?
    };
    let total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds;
    Some(Duration::new(total, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timespans_parse_as_the_host_writes_them() {
        assert_eq!(timespan("00:00:15"), Some(Duration::from_secs(15)));
        assert_eq!(timespan("00:05:00"), Some(Duration::from_secs(300)));
        assert_eq!(timespan("1.02:00:00"), Some(Duration::from_secs(26 * 3600)));
        assert_eq!(timespan("00:00:00.5"), Some(Duration::from_millis(500)));
        for bad in ["", "15", "00:60:00", "a:b:c", "00:00:00:00", "00:00:61"] {
            assert_eq!(timespan(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_built_in_app_is_this_repository_s_function_defs_and_host_json() {
        let app = AppDefinition::built_in().unwrap();
        let on_disk =
            AppDefinition::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap();
        assert_eq!(app, on_disk);
        let dispatch = app.function("dispatch").unwrap();
        assert!(
            matches!(&dispatch.trigger, Trigger::Timer { schedule, .. } if schedule.to_string() == "*/5 * * * * *")
        );
        assert_eq!(
            app.consumer_of("summarize-premium").unwrap().name,
            "summarize-premium"
        );
        assert_eq!(
            app.queue_of("summarize-standard"),
            Some("summarize-standard")
        );
        assert!(app.function("classify").unwrap().retry.is_some());
        assert_eq!(app.kafka_output_bindings(), vec!["notifications"]);
    }

    #[test]
    fn a_setting_reference_resolves_from_the_app_settings() {
        let settings: BTreeMap<String, String> =
            [("KAFKA_TOPIC".to_owned(), "incidents".to_owned())].into();
        assert_eq!(resolve_setting("%KAFKA_TOPIC%", &settings), "incidents");
        assert_eq!(resolve_setting("%MISSING%", &settings), "%MISSING%");
        assert_eq!(resolve_setting("plain", &settings), "plain");
    }

    #[test]
    fn definitions_the_emulation_cannot_honour_are_refused_with_the_file_named() {
        let two = r#"{"bindings":[{"type":"timerTrigger","direction":"in","name":"a","schedule":"* * * * * *"},
                     {"type":"queueTrigger","direction":"in","name":"b","queueName":"q"}]}"#;
        assert!(matches!(
            parse_function("f", two, "f.json"),
            Err(DefinitionError::Invalid { .. })
        ));
        let bad_schedule = r#"{"bindings":[{"type":"timerTrigger","direction":"in","name":"a","schedule":"*/5 * * * *"}]}"#;
        assert!(matches!(
            parse_function("f", bad_schedule, "f.json"),
            Err(DefinitionError::Schedule { .. })
        ));
        for retry in [
            r#"{"strategy":"exponentialBackoff","maxRetryCount":3,"minimumInterval":"00:01:00","maximumInterval":"00:00:01"}"#,
            r#"{"strategy":"linear","maxRetryCount":1,"delayInterval":"00:00:01"}"#,
            r#"{"strategy":"fixedDelay","maxRetryCount":-2,"delayInterval":"00:00:01"}"#,
            r#"{"strategy":"fixedDelay","maxRetryCount":1,"delayInterval":"5s"}"#,
        ] {
            let text = format!(
                r#"{{"bindings":[{{"type":"queueTrigger","direction":"in","name":"b","queueName":"q"}}],"retry":{retry}}}"#
            );
            assert!(
                matches!(
                    parse_function("f", &text, "f.json"),
                    Err(DefinitionError::Invalid { .. })
                ),
                "{retry}"
            );
        }
        assert!(parse_host(r#"{"extensions":{"queues":{"batchSize":64}}}"#, "host.json").is_err());
        assert!(parse_host("{", "host.json").is_err());
    }

    #[test]
    fn host_json_defaults_are_the_platform_s() {
        let host = parse_host("{}", "host.json").unwrap();
        assert_eq!(host.queues.batch_size, 16);
        assert_eq!(host.queues.new_batch_threshold, 8);
        assert_eq!(host.queues.max_dequeue_count, 5);
        assert_eq!(host.queues.visibility_timeout, Duration::ZERO);
        assert_eq!(host.kafka.max_batch_size, 64);
        assert_eq!(host.function_timeout, Duration::from_secs(300));
    }
}
