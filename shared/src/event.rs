//! The ServiceNow incident event contract: raw Kafka value to a typed ticket or a typed rejection.
