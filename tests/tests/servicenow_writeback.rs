//! Work-note write-back against a local Table API server and a real redis-server outbox.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use stormgate_e2e::servicenow_server::{FakeServiceNow, SnReply};
use stormgate_handlers::secrets::Secret;
use stormgate_handlers::servicenow::{
    DeliveryReport, ServiceNowClient, ServiceNowConfig, WorkNoteOutbox, WorkNoteSink,
};
use stormgate_shared::clock::{Clock, EpochMillis, ManualClock};
use stormgate_shared::redis_link::RedisLink;
use stormgate_shared::sinks::WorkNote;
use stormgate_shared::testing::redis_server::RedisServer;
use stormgate_shared::ticket_id::TicketId;

const T0: EpochMillis = EpochMillis(1_800_000_000_000);
const DRAIN_BUDGET: Duration = Duration::from_secs(10);

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
            password: Secret::new(password),
            timeout: Duration::from_secs(2),
        })
        .unwrap(),
        outbox: WorkNoteOutbox::new(
            Arc::new(RedisLink::ready(redis_connection(redis).await)),
            WorkNoteOutbox::DEFAULT_PREFIX,
        ),
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
    let early = sink.drain(&clock, 10, DRAIN_BUDGET).await.unwrap();
    assert_eq!(early, DeliveryReport::default());
    assert_eq!(server.attempts(), 1);

    // After it, the notes go out.
    clock.advance(Duration::from_secs(120));
    let drained = sink.drain(&clock, 10, DRAIN_BUDGET).await.unwrap();
    assert_eq!(drained.delivered, 3, "{drained:?}");
    assert_eq!(server.notes().len(), 3);
    assert_eq!(sink.outbox.pending().await.unwrap(), 0);
    assert!(clock.now() > T0);
}

#[tokio::test]
async fn server_errors_are_retried_later_and_the_rest_wait_without_an_attempt() {
    let server = FakeServiceNow::start("stormgate.integration", "s3cret").await;
    let redis = RedisServer::start().expect("start redis-server");
    let sink = sink(&server, &redis, "s3cret").await;
    let clock = ManualClock::starting_at(T0);
    server.script([SnReply::Status(503)]);
    let report = sink.deliver_new(&[note(1), note(2)], &clock).await.unwrap();
    assert_eq!(
        report,
        DeliveryReport {
            delivered: 0,
            queued: 2,
            dropped: 0
        }
    );
    assert_eq!(
        server.attempts(),
        1,
        "an unavailable ServiceNow is asked once"
    );
    // Not due yet: the first retry waits a minute.
    assert_eq!(
        sink.drain(&clock, 10, DRAIN_BUDGET).await.unwrap(),
        DeliveryReport::default()
    );
    clock.advance(Duration::from_secs(61));
    assert_eq!(
        sink.drain(&clock, 10, DRAIN_BUDGET)
            .await
            .unwrap()
            .delivered,
        2
    );
    let mut delivered: Vec<String> = server.notes().into_iter().map(|n| n.sys_id).collect();
    delivered.sort();
    assert_eq!(delivered, [format!("{:032x}", 1), format!("{:032x}", 2)]);
    assert_eq!(sink.outbox.pending().await.unwrap(), 0);
}

#[tokio::test]
async fn a_missing_record_is_dropped_not_retried() {
    let server = FakeServiceNow::start("stormgate.integration", "s3cret").await;
    let redis = RedisServer::start().expect("start redis-server");
    let sink = sink(&server, &redis, "s3cret").await;
    let clock = ManualClock::starting_at(T0);
    server.script([SnReply::Status(404)]);
    let report = sink.deliver_new(&[note(1), note(2)], &clock).await.unwrap();
    assert_eq!(
        report,
        DeliveryReport {
            delivered: 1,
            queued: 0,
            dropped: 1
        }
    );
    assert_eq!(sink.outbox.pending().await.unwrap(), 0);
}

#[tokio::test]
async fn a_429_seen_by_one_instance_holds_back_every_instance() {
    let server = FakeServiceNow::start("stormgate.integration", "s3cret").await;
    let redis = RedisServer::start().expect("start redis-server");
    let first = sink(&server, &redis, "s3cret").await;
    let second = sink(&server, &redis, "s3cret").await;
    let clock = ManualClock::starting_at(T0);
    server.script([SnReply::RateLimited(30)]);
    let report = first.deliver_new(&[note(1)], &clock).await.unwrap();
    assert_eq!(report.queued, 1);
    // The other instance has seen no 429 itself, yet sends nothing before Retry-After.
    let report = second.deliver_new(&[note(2)], &clock).await.unwrap();
    assert_eq!(report.queued, 1);
    assert_eq!(server.attempts(), 1);
    assert_eq!(
        second.drain(&clock, 10, DRAIN_BUDGET).await.unwrap(),
        DeliveryReport::default()
    );
    clock.advance(Duration::from_secs(30));
    let drained = second.drain(&clock, 10, DRAIN_BUDGET).await.unwrap();
    assert_eq!(drained.delivered, 2, "{drained:?}");
    assert_eq!(server.notes().len(), 2);
}

#[tokio::test]
async fn a_note_claimed_by_a_drain_that_never_finished_is_sent_again_later() {
    let server = FakeServiceNow::start("stormgate.integration", "s3cret").await;
    let redis = RedisServer::start().expect("start redis-server");
    let sink = sink(&server, &redis, "s3cret").await;
    let clock = ManualClock::starting_at(T0);
    let pending = stormgate_handlers::servicenow::PendingNote {
        note: note(7),
        attempts: 0,
    };
    sink.outbox.push(&pending, T0).await.unwrap();
    // A drain claims the note and dies before answering for it.
    let claimed = sink
        .outbox
        .claim_due(T0, T0.plus(Duration::from_secs(120)))
        .await
        .unwrap()
        .expect("the note is due");
    assert_eq!(claimed.pending, pending);
    assert_eq!(
        sink.drain(&clock, 10, DRAIN_BUDGET)
            .await
            .unwrap()
            .delivered,
        0
    );
    clock.advance(Duration::from_secs(121));
    assert_eq!(
        sink.drain(&clock, 10, DRAIN_BUDGET)
            .await
            .unwrap()
            .delivered,
        1
    );
    assert_eq!(server.notes()[0].sys_id, format!("{:032x}", 7));
    assert_eq!(sink.outbox.pending().await.unwrap(), 0);
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
