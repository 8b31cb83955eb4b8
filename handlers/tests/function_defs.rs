//! `function-defs/` and the router's function table must describe the same functions.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use stormgate_handlers::app::{FUNCTIONS, Trigger};
use stormgate_handlers::functions::{classify, dispatch, rollup, summarize};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/platform")
}

fn defs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../function-defs")
}

fn function_json(name: &str) -> Value {
    let path = defs_dir().join(name).join("function.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn bindings(name: &str) -> Vec<Value> {
    function_json(name)["bindings"].as_array().unwrap().clone()
}

fn trigger_binding(name: &str) -> Value {
    let triggers: Vec<Value> = bindings(name)
        .into_iter()
        .filter(|b| b["type"].as_str().unwrap().ends_with("Trigger"))
        .collect();
    assert_eq!(triggers.len(), 1, "{name} must have exactly one trigger");
    triggers[0].clone()
}

fn binding_named(function: &str, binding: &str) -> Value {
    bindings(function)
        .into_iter()
        .find(|b| b["name"] == binding)
        .unwrap_or_else(|| panic!("{function} has no binding {binding:?}"))
}

#[test]
fn every_function_folder_has_a_route_and_every_route_a_folder() {
    let folders: BTreeSet<String> = std::fs::read_dir(defs_dir())
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_dir())
        .map(|entry| entry.file_name().into_string().unwrap())
        .collect();
    let routes: BTreeSet<String> = FUNCTIONS.iter().map(|f| f.name.to_owned()).collect();
    assert_eq!(
        folders, routes,
        "function-defs/ folders versus app::FUNCTIONS"
    );
}

/// What each HTTP function requires: nothing for the health probe, the host's master key
/// (`admin`) for the operators' controls, a function key for everything else.
fn expected_auth_level(function: &str) -> &'static str {
    match function {
        "health" => "anonymous",
        "controls" => "admin",
        _ => "function",
    }
}

#[test]
fn http_functions_match_their_route_methods_and_auth_level() {
    for function in FUNCTIONS {
        let trigger = trigger_binding(function.name);
        match function.trigger {
            Trigger::Http { methods, route } => {
                assert_eq!(trigger["type"], "httpTrigger", "{}", function.name);
                assert_eq!(trigger["route"], route, "{}", function.name);
                let declared: Vec<&str> = trigger["methods"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_str().unwrap())
                    .collect();
                assert_eq!(declared, methods, "{}", function.name);
                let expected_auth = expected_auth_level(function.name);
                assert_eq!(trigger["authLevel"], expected_auth, "{}", function.name);
                // Raw forwarding only applies to functions with nothing but httpTrigger + http out.
                let types: Vec<Value> = bindings(function.name)
                    .iter()
                    .map(|b| b["type"].clone())
                    .collect();
                assert_eq!(types, vec!["httpTrigger", "http"], "{}", function.name);
            }
            Trigger::Invocation => assert_ne!(trigger["type"], "httpTrigger", "{}", function.name),
        }
    }
}

#[test]
fn classify_reads_a_kafka_batch_with_credentials_from_app_settings() {
    let trigger = trigger_binding("classify");
    assert_eq!(trigger["type"], "kafkaTrigger");
    assert_eq!(trigger["name"], classify::EVENTS_BINDING);
    assert_eq!(trigger["cardinality"], "many");
    assert_eq!(trigger["dataType"], "string");
    // The value itself is checked against the Kafka extension's enum in
    // `every_binding_property_is_one_the_host_binds_with_a_value_its_type_accepts`.
    assert_eq!(trigger["authenticationMode"], "Plain");
    for (field, setting) in [
        ("brokerList", "%KAFKA_BROKERS%"),
        ("topic", "%KAFKA_TOPIC%"),
        ("consumerGroup", "%KAFKA_CONSUMER_GROUP%"),
        ("username", "%KAFKA_USERNAME%"),
        ("password", "%KAFKA_PASSWORD%"),
    ] {
        assert_eq!(trigger[field], setting, "{field}");
    }
    // `classify` settles no job (its instant summary owes no delivery), so it has no
    // output: the functions that settle jobs publish their notices.
    assert_eq!(
        bindings("classify").len(),
        1,
        "classify has only its trigger"
    );
}

#[test]
fn dispatch_hands_off_to_one_storage_queue_per_tier() {
    let timer = trigger_binding("dispatch");
    assert_eq!(
        (timer["type"].as_str(), timer["name"].as_str()),
        (Some("timerTrigger"), Some(dispatch::TIMER_BINDING))
    );
    assert_eq!(timer["schedule"], "*/5 * * * * *");
    for (binding, queue, consumer) in [
        (
            dispatch::PREMIUM_QUEUE_BINDING,
            "summarize-premium",
            "summarize-premium",
        ),
        (
            dispatch::STANDARD_QUEUE_BINDING,
            "summarize-standard",
            "summarize-standard",
        ),
    ] {
        let output = binding_named("dispatch", binding);
        assert_eq!(output["type"], "queue");
        assert_eq!(output["direction"], "out");
        assert_eq!(output["queueName"], queue);
        assert_eq!(output["connection"], "AzureWebJobsStorage");
        let trigger = trigger_binding(consumer);
        assert_eq!(trigger["type"], "queueTrigger");
        assert_eq!(trigger["name"], summarize::HANDOFF_BINDING);
        assert_eq!(
            trigger["queueName"], queue,
            "{consumer} consumes what dispatch sends it"
        );
        assert_eq!(trigger["connection"], "AzureWebJobsStorage");
    }
}

/// Every function that settles jobs publishes their customer notices: `dispatch` (jobs
/// spilled or shed to the extractive tier) and both tier functions, through a Kafka
/// output to the notifications topic that the extension can load.
#[test]
fn every_function_that_settles_jobs_publishes_notices_to_the_notifications_topic() {
    assert_eq!(
        dispatch::NOTIFICATIONS_BINDING,
        summarize::NOTIFICATIONS_BINDING
    );
    // Their `protocol` and `authenticationMode` are checked against the extension's own
    // enums with every other binding property (tests/fixtures/platform/function-bindings.json).
    for function in ["dispatch", "summarize-premium", "summarize-standard"] {
        let output = binding_named(function, summarize::NOTIFICATIONS_BINDING);
        assert_eq!(output["type"], "kafka", "{function}");
        assert_eq!(output["direction"], "out", "{function}");
        assert_eq!(output["dataType"], "string", "{function}");
        for (field, setting) in [
            ("brokerList", "%KAFKA_BROKERS%"),
            ("topic", "%KAFKA_NOTIFICATIONS_TOPIC%"),
            ("username", "%KAFKA_USERNAME%"),
            ("password", "%KAFKA_PASSWORD%"),
        ] {
            assert_eq!(output[field], setting, "{function} {field}");
        }
    }
}

#[test]
fn rollup_runs_every_minute() {
    let timer = trigger_binding("rollup");
    assert_eq!(timer["type"], "timerTrigger");
    assert_eq!(timer["name"], rollup::TIMER_BINDING);
    assert_eq!(timer["schedule"], "0 * * * * *");
}

#[test]
fn host_json_starts_the_handler_with_forwarding_and_the_v4_bundle() {
    let text = std::fs::read_to_string(defs_dir().join("../host.json")).unwrap();
    let host: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(host["version"], "2.0");
    assert_eq!(
        host["customHandler"]["description"]["defaultExecutablePath"],
        "handler"
    );
    assert_eq!(host["customHandler"]["enableForwardingHttpRequest"], true);
    assert_eq!(
        host["extensionBundle"]["id"],
        "Microsoft.Azure.Functions.ExtensionBundle"
    );
    assert_eq!(host["extensionBundle"]["version"], "[4.*, 5.0.0)");
    assert_eq!(
        host["extensions"]["http"]["routePrefix"], "api",
        "app::HTTP_ROUTE_PREFIX assumes it"
    );
    assert!(host["functionTimeout"].is_string());
    assert!(
        host["extensions"]["queues"]["maxDequeueCount"]
            .as_u64()
            .unwrap()
            >= 2,
        "poison handling needs retries"
    );
    // A failed tier invocation's message comes back after the visibility timeout; the
    // claims on its calls must have run out by then, or the redelivery would leave
    // them to a dead invocation until the leases expire.
    let visibility = host["extensions"]["queues"]["visibilityTimeout"]
        .as_str()
        .unwrap();
    let seconds: u64 = visibility
        .split(':')
        .try_fold(0u64, |total, part| {
            part.parse::<u64>().map(|n| total * 60 + n)
        })
        .unwrap();
    assert_eq!(
        seconds, 15,
        "tests/tests/fault_rig QUEUE_VISIBILITY_TIMEOUT"
    );
    assert!(
        stormgate_shared::summarize::DEFAULT_CALL_CLAIM.as_secs() < seconds,
        "a call claim outlives the queue's visibility timeout"
    );
}

/// Read straight from the folders, not through the router's table: a folder added with an
/// anonymous HTTP trigger fails here even before anyone adds its route.
#[test]
fn every_http_trigger_on_disk_needs_a_function_key_except_health() {
    let mut http_functions = Vec::new();
    for entry in std::fs::read_dir(defs_dir()).unwrap() {
        let entry = entry.unwrap();
        if !entry.file_type().unwrap().is_dir() {
            continue;
        }
        let name = entry.file_name().into_string().unwrap();
        for binding in bindings(&name) {
            if binding["type"] != "httpTrigger" {
                continue;
            }
            http_functions.push(name.clone());
            let expected = expected_auth_level(&name);
            assert_eq!(
                binding["authLevel"], expected,
                "{name}: every HTTP route but health requires a function key, and the controls the master key"
            );
            if name == "health" {
                // Anonymous is only safe for a route that reveals nothing and changes nothing.
                assert_eq!(binding["methods"], serde_json::json!(["get"]), "{name}");
            }
        }
    }
    http_functions.sort();
    assert!(
        http_functions.contains(&"health".to_owned()) && http_functions.len() >= 2,
        "expected health and the read APIs among the HTTP functions: {http_functions:?}"
    );
}

// ---- the platform's own binding definitions ---------------------------------------------------

/// `tests/fixtures/platform/function-bindings.json`: per binding type, the properties the host
/// binds and the member names of the enums behind them, extracted from the extensions the
/// bundle range of `host.json` resolves to (origin, commits and licences in the file).
fn binding_table() -> Value {
    let path = fixtures_dir().join("function-bindings.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What the host would refuse or silently ignore in one binding, checked against `table`.
///
/// Property names match case-insensitively (the host's `AttributeCloner` uses
/// `OrdinalIgnoreCase`); a name the binding type does not have is ignored by the host, which is
/// how a typo goes unnoticed, so it is reported. An enum value must be one of the enum's member
/// names ignoring case, which is what `Enum.Parse(..., ignoreCase: true)` accepts (digits and
/// comma lists aside, which nothing here should use).
fn binding_problems(table: &Value, function: &str, binding: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(fields) = binding.as_object() else {
        return vec![format!("{function}: a binding is not an object")];
    };
    let kind = binding["type"].as_str().unwrap_or_default();
    let Some((_, spec)) = table["bindings"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(kind))
    else {
        return vec![format!(
            "{function}: binding type {kind:?} is not in the table of the bundle's extensions"
        )];
    };
    let known = |name: &str| -> Option<&str> {
        [&table["every_binding"], &spec["properties"]]
            .into_iter()
            .flat_map(|group| group.as_object().unwrap().iter())
            .find(|(property, _)| property.eq_ignore_ascii_case(name))
            .map(|(_, shape)| shape.as_str().unwrap())
    };
    for (property, value) in fields {
        let Some(shape) = known(property) else {
            problems.push(format!(
                "{function}: `{property}` is not a property of a {kind} binding (the host would ignore it)"
            ));
            continue;
        };
        let accepted = match shape {
            "string" => value.is_string(),
            "boolean" => value.is_boolean(),
            "integer" => value.is_i64() || value.is_u64(),
            "string[]" => value
                .as_array()
                .is_some_and(|items| items.iter().all(Value::is_string)),
            _ => match shape.strip_prefix("enum:") {
                Some(enum_name) => {
                    let names = table["enums"][enum_name].as_array().unwrap();
                    let given = value.as_str().unwrap_or_default();
                    let found = names
                        .iter()
                        .any(|name| name.as_str().unwrap().eq_ignore_ascii_case(given));
                    if !found {
                        problems.push(format!(
                            "{function}: `{property}` = {value} is not a member of {enum_name} {names:?}"
                        ));
                    }
                    continue;
                }
                None => panic!("unknown shape {shape:?} in the binding table"),
            },
        };
        if !accepted {
            problems.push(format!(
                "{function}: `{property}` = {value} is not a {shape}"
            ));
        }
    }
    problems
}

fn function_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(defs_dir())
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_dir())
        .map(|entry| entry.file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn every_binding_property_is_one_the_host_binds_with_a_value_its_type_accepts() {
    let table = binding_table();
    let mut problems = Vec::new();
    let mut enum_values_checked = 0;
    for function in function_names() {
        for binding in bindings(&function) {
            problems.extend(binding_problems(&table, &function, &binding));
            enum_values_checked += ["protocol", "authenticationMode", "authLevel", "direction"]
                .iter()
                .filter(|p| binding.get(**p).is_some())
                .count();
        }
    }
    assert_eq!(problems, Vec::<String>::new());
    assert!(enum_values_checked > 20, "{enum_values_checked}");
}

#[test]
fn binding_table_is_the_bundles_kafka_extension_and_matches_host_json() {
    let table = binding_table();
    let text = std::fs::read_to_string(defs_dir().join("../host.json")).unwrap();
    let host: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        table["extension_bundle"]["range"], host["extensionBundle"]["version"],
        "the table must be re-extracted for the bundle range host.json asks for"
    );
    assert_eq!(
        table["extension_bundle"]["extensions"]["Microsoft.Azure.WebJobs.Extensions.Kafka"],
        "4.3.2"
    );
    assert_eq!(table["sources"]["kafka"]["tag"], "4.3.2");
}

#[test]
fn kafka_protocol_spelt_as_librdkafka_writes_it_is_refused() {
    let table = binding_table();
    let mut trigger = trigger_binding("classify");
    assert!(binding_problems(&table, "classify", &trigger).is_empty());
    // librdkafka's `security.protocol` spelling, which one Learn table prints: not an enum name.
    trigger["protocol"] = Value::from("sasl_ssl");
    let problems = binding_problems(&table, "classify", &trigger);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("BrokerProtocol"), "{problems:?}");
    // Case is ignored by the host, so the samples' `SASLSSL` binds.
    trigger["protocol"] = Value::from("SASLSSL");
    assert!(binding_problems(&table, "classify", &trigger).is_empty());
}

#[test]
fn binding_rule_refuses_a_misspelt_property_and_a_wrongly_typed_value() {
    let table = binding_table();
    let mut notifications = binding_named("dispatch", dispatch::NOTIFICATIONS_BINDING);
    notifications["authMode"] = Value::from("Plain");
    notifications["enableIdempotence"] = Value::from("true");
    let problems = binding_problems(&table, "dispatch", &notifications);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`authMode` is not a property"))
    );
    assert!(problems.iter().any(|p| p.contains("is not a boolean")));
    let mut timer = trigger_binding("dispatch");
    timer["authLevel"] = Value::from("function");
    assert_eq!(binding_problems(&table, "dispatch", &timer).len(), 1);
}
