//! Fuzzes the Functions invocation payload decoder: any HTTP body the host (or anyone who
//! reaches the handler's port) sends must decode or be refused, never panic, and every
//! binding must decode as a Kafka batch, a timer, a string or a queue message without panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormgate_handlers::invocation::{InvocationRequest, KafkaBatch, decode_string};

fuzz_target!(|body: &[u8]| {
    let Ok(request) = InvocationRequest::from_slice(body) else {
        return;
    };
    for (name, value) in &request.data {
        if let Ok(batch) = KafkaBatch::decode(value, name) {
            // Every element is accounted for: accepted or rejected, never lost.
            assert_eq!(
                batch.accepted().count() + batch.rejected().count(),
                batch.events.len()
            );
            for event in batch.accepted() {
                let _ = event.header_text("action");
            }
        }
        let _ = decode_string(value, name);
        let _ = request.timer(name);
        let _ = request.queue_message::<serde_json::Value>(name);
    }
    let _ = request.metadata.dequeue_count();
});
