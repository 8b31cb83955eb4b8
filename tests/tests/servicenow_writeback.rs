//! Work-note write-back against a local Table API server and a real redis-server outbox.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use stormgate_e2e::servicenow_server::{FakeServiceNow, SnReply};
use stormgate_handlers::servicenow::{
    DeliveryReport, ServiceNowClient, ServiceNowConfig, WorkNoteOutbox, WorkNoteSink,
};
use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::summarize::WorkNote;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::ticket_id::TicketId;

const T0: EpochMillis = EpochMillis(1_800_000_000_000);

fn note(n: u8) -> WorkNote {
    WorkNote {
        ticket: format!("{n:032x}").parse::<TicketId>().unwrap(),
        number: format!("INC00300{n:02}"),
        text: format!("Summary of ticket {n}."),
    }
}

async fn sink(server: &FakeServiceNow, redis: &RedisServer, password: &str) -> WorkNoteSink {
    WorkNoteSink {
        client: ServiceNowClient::new(ServiceNowConfig {
            instance_url: server.instance_url(),
            username: "stormgate.integration".into(),
            password: password.into(),
            timeout: Duration::from_secs(2),
        })
        .unwrap(),
        outbox: WorkNoteOutbox::new(redis_connection(redis).await, WorkNoteOutbox::DEFAULT_KEY),
    }
}

#[tokio::test]
async fn notes_are_patched_as_work_notes_with_basic_auth() {
    let server = FakeServiceNow::start("stormgate.integration", "s3cret").await;
    let redis = RedisServer::start().expect("start redis-server");
    let sink = sink(&server, &redis, "s3cret").await;
    let clock = ManualClock::starting_at(T0);
    let report = sink.deliver_new(&[note(1), note(2)], &clock).await.unwrap();
    assert_eq!(
        report,
        DeliveryReport {
            delivered: 2,
            queued: 0,
            dropped: 0
        }
    );
    let notes = server.notes();
    assert_eq!(notes[0].sys_id, format!("{:032x}", 1));
    assert_eq!(notes[0].work_notes, "Summary of ticket 1.");
    assert_eq!(sink.outbox.pending().await.unwrap(), 0);
}

#[tokio::test]
async fn a_429_is_honoured_and_the_notes_wait_in_the_outbox_until_retry_after() {
    let server = FakeServiceNow::start("stormgate.integration", "s3cret").await;
    let redis = RedisServer::start().expect("start redis-server");
    let sink = sink(&server, &redis, "s3cret").await;
    let clock = ManualClock::starting_at(T0);
    server.script([SnReply::RateLimited(120)]);

    // The first note meets the 429; the others are not even sent during the cooldown.
    let report = sink
        .deliver_new(&[note(1), note(2), note(3)], &clock)
        .await
        .unwrap();
    assert_eq!((report.delivered, report.queued), (0, 3));
    assert_eq!(server.attempts(), 1);
    assert_eq!(
        sink.client.cooldown_until(),
        T0.plus(Duration::from_secs(120))
    );
    assert_eq!(sink.outbox.pending().await.unwrap(), 3);

    // Draining before Retry-After has passed sends nothing.
    clock.advance(Duration::from_secs(60));
    let early = sink.drain(&clock, 10).await.unwrap();
    assert_eq!(early, DeliveryReport::default());
    assert_eq!(server.attempts(), 1);

    // After it, the notes go out.
    clock.advance(Duration::from_secs(120));
    let drained = sink.drain(&clock, 10).await.unwrap();
    assert_eq!(drained.delivered, 3, "{drained:?}");
    assert_eq!(server.notes().len(), 3);
    assert_eq!(sink.outbox.pending().await.unwrap(), 0);
    assert!(clock.now() > T0);
}

#[tokio::test]
async fn server_errors_are_retried_later_and_missing_records_are_dropped() {
    let server = FakeServiceNow::start("stormgate.integration", "s3cret").await;
    let redis = RedisServer::start().expect("start redis-server");
    let sink = sink(&server, &redis, "s3cret").await;
    let clock = ManualClock::starting_at(T0);
    server.script([SnReply::Status(503), SnReply::Status(404)]);
    let report = sink.deliver_new(&[note(1), note(2)], &clock).await.unwrap();
    assert_eq!(
        report,
        DeliveryReport {
            delivered: 0,
            queued: 1,
            dropped: 1
        }
    );
    // Not due yet: the first retry waits a minute.
    assert_eq!(
        sink.drain(&clock, 10).await.unwrap(),
        DeliveryReport::default()
    );
    clock.advance(Duration::from_secs(61));
    assert_eq!(sink.drain(&clock, 10).await.unwrap().delivered, 1);
    assert_eq!(server.notes()[0].sys_id, format!("{:032x}", 1));
}

#[tokio::test]
async fn wrong_credentials_are_rejected_not_retried() {
    let server = FakeServiceNow::start("stormgate.integration", "s3cret").await;
    let redis = RedisServer::start().expect("start redis-server");
    let sink = sink(&server, &redis, "wrong").await;
    let clock = ManualClock::starting_at(T0);
    let report = sink.deliver_new(&[note(1)], &clock).await.unwrap();
    assert_eq!(report.dropped, 1);
    assert_eq!(sink.outbox.pending().await.unwrap(), 0);
}

async fn redis_connection(redis: &RedisServer) -> redis::aio::ConnectionManager {
    let client = redis::Client::open(redis.url()).unwrap();
    redis::aio::ConnectionManager::new(client).await.unwrap()
}
