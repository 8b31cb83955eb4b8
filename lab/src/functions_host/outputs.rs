//! Where a successful invocation's outputs go, by the function's output bindings: each
//! value under `Outputs.<binding>` is one message (an array is several), enqueued on the
//! binding's Storage queue or published to its Kafka topic. A failed invocation's
//! outputs are discarded by the caller, never routed.

use std::collections::BTreeMap;

use serde_json::Value;

use super::app_definition::{FunctionDefinition, Output, resolve_setting};

/// The messages one answer sends, by destination.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoutedOutputs {
    /// (queue name, message).
    pub queue_messages: Vec<(String, Value)>,
    /// (topic, as resolved from the app settings, message).
    pub kafka_messages: Vec<(String, Value)>,
}

/// The outputs of `function`'s answer `body`, routed by its bindings.
pub fn route(
    function: &FunctionDefinition,
    body: &Value,
    settings: &BTreeMap<String, String>,
) -> RoutedOutputs {
    let mut routed = RoutedOutputs::default();
    for output in &function.outputs {
        let messages = match &body["Outputs"][output.binding()] {
            Value::Null => continue,
            Value::Array(items) => items.clone(),
            one => vec![one.clone()],
        };
        match output {
            Output::Queue { queue, .. } => routed
                .queue_messages
                .extend(messages.into_iter().map(|m| (queue.clone(), m))),
            Output::Kafka { topic, .. } => {
                let topic = resolve_setting(topic, settings);
                routed
                    .kafka_messages
                    .extend(messages.into_iter().map(|m| (topic.clone(), m)));
            }
            Output::Http { .. } => {}
        }
    }
    routed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions_host::app_definition::AppDefinition;
    use serde_json::json;

    #[test]
    fn dispatch_s_outputs_go_to_the_queues_and_topic_its_function_json_names() {
        let app = AppDefinition::built_in().unwrap();
        let dispatch = app.function("dispatch").unwrap();
        let body = json!({"Outputs": {
            "premiumQueue": [{"a": 1}, {"a": 2}],
            "standardQueue": {"b": 1},
            "notifications": [{"id": "n"}],
            "unknown": [1]
        }});
        let settings = [("KAFKA_NOTIFICATIONS_TOPIC".to_owned(), "notices".to_owned())].into();
        let routed = route(dispatch, &body, &settings);
        let queues: Vec<&str> = routed
            .queue_messages
            .iter()
            .map(|(q, _)| q.as_str())
            .collect();
        assert_eq!(
            queues,
            [
                "summarize-premium",
                "summarize-premium",
                "summarize-standard"
            ]
        );
        assert_eq!(
            routed.kafka_messages,
            vec![("notices".to_owned(), json!({"id": "n"}))]
        );
    }
}
