//! The work-note outbox's conformance suite: every test is written once against
//! `&dyn OutboxStore` and runs against both backends — in memory, and in Redis on a real
//! `redis-server` each test starts on a free port — plus the Redis outbox reading the
//! keys the deployed handler wrote.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: failing loudly is the point"
)]

use std::time::Duration;

use stormgate_shared::clock::EpochMillis;
use stormgate_shared::store::outbox::{OutboxStore, RedisOutbox};
use stormgate_shared::testing::redis_server::RedisServer;

fn members(names: &[&str]) -> Vec<String> {
    names.iter().map(|&n| n.to_owned()).collect()
}

async fn claim(outbox: &dyn OutboxStore, now: u64, hold_until: u64) -> Option<String> {
    outbox
        .claim_due(EpochMillis(now), EpochMillis(hold_until))
        .await
        .unwrap()
}

async fn members_are_claimed_earliest_due_first_and_held_until_their_claims_end(
    outbox: &dyn OutboxStore,
) {
    outbox
        .push(&members(&["b"]), EpochMillis(50))
        .await
        .unwrap();
    outbox
        .push(&members(&["a"]), EpochMillis(100))
        .await
        .unwrap();
    outbox
        .push(&members(&["c"]), EpochMillis(500))
        .await
        .unwrap();
    assert_eq!(claim(outbox, 200, 1_000).await.as_deref(), Some("b"));
    assert_eq!(claim(outbox, 200, 1_000).await.as_deref(), Some("a"));
    assert_eq!(claim(outbox, 200, 1_000).await, None, "c is not due yet");
    assert_eq!(
        outbox.pending().await.unwrap(),
        3,
        "claimed members stay queued"
    );
    // Both holds end at 1,000: equal times go by the member's bytes.
    assert_eq!(claim(outbox, 1_000, 2_000).await.as_deref(), Some("c"));
    assert_eq!(claim(outbox, 1_000, 2_000).await.as_deref(), Some("a"));
    assert_eq!(claim(outbox, 1_000, 2_000).await.as_deref(), Some("b"));
    assert_eq!(claim(outbox, 1_000, 2_000).await, None);
}

async fn a_member_pushed_again_takes_the_new_time(outbox: &dyn OutboxStore) {
    outbox
        .push(&members(&["a", "b"]), EpochMillis(100))
        .await
        .unwrap();
    outbox
        .push(&members(&["a"]), EpochMillis(900))
        .await
        .unwrap();
    assert_eq!(outbox.pending().await.unwrap(), 2);
    assert_eq!(claim(outbox, 500, 600).await.as_deref(), Some("b"));
    assert_eq!(claim(outbox, 500, 600).await, None);
    assert_eq!(claim(outbox, 900, 1_000).await.as_deref(), Some("b"));
    assert_eq!(claim(outbox, 900, 1_000).await.as_deref(), Some("a"));
}

async fn reschedule_replaces_a_member_and_remove_drops_it(outbox: &dyn OutboxStore) {
    outbox
        .push(&members(&["a", "b"]), EpochMillis(100))
        .await
        .unwrap();
    let claimed = claim(outbox, 100, 200).await.unwrap();
    assert_eq!(claimed, "a");
    outbox
        .reschedule(&claimed, "a, attempt 2", EpochMillis(5_000))
        .await
        .unwrap();
    assert_eq!(outbox.pending().await.unwrap(), 2);
    outbox.remove("b").await.unwrap();
    outbox.remove("never queued").await.unwrap();
    assert_eq!(outbox.pending().await.unwrap(), 1);
    assert_eq!(claim(outbox, 4_999, 6_000).await, None);
    assert_eq!(
        claim(outbox, 5_000, 6_000).await.as_deref(),
        Some("a, attempt 2")
    );
}

async fn the_cooldown_is_extended_and_never_shortened(outbox: &dyn OutboxStore) {
    assert_eq!(outbox.cooldown_until().await.unwrap(), EpochMillis::ZERO);
    let wait = Duration::from_secs(600);
    outbox
        .extend_cooldown(EpochMillis(5_000), wait)
        .await
        .unwrap();
    outbox
        .extend_cooldown(EpochMillis(3_000), wait)
        .await
        .unwrap();
    assert_eq!(outbox.cooldown_until().await.unwrap(), EpochMillis(5_000));
    outbox
        .extend_cooldown(EpochMillis(9_000), wait)
        .await
        .unwrap();
    assert_eq!(outbox.cooldown_until().await.unwrap(), EpochMillis(9_000));
}

macro_rules! conformance {
    ($($test:ident),* $(,)?) => {
        mod memory {
            use stormgate_shared::store::outbox::MemoryOutbox;
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(&MemoryOutbox::new()).await;
                }
            )*
        }

        mod redis {
            use stormgate_shared::store::outbox::RedisOutbox;
            use stormgate_shared::testing::redis_server::RedisServer;
            $(
                #[tokio::test]
                async fn $test() {
                    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
                    let link = server.link().unwrap_or_else(|e| panic!("{e}"));
                    super::$test(&RedisOutbox::new(link, "conformance:servicenow")).await;
                }
            )*
        }
    };
}

conformance!(
    members_are_claimed_earliest_due_first_and_held_until_their_claims_end,
    a_member_pushed_again_takes_the_new_time,
    reschedule_replaces_a_member_and_remove_drops_it,
    the_cooldown_is_extended_and_never_shortened,
);

/// What the deployed handler holds: its notes and cooldown under `stormgate:servicenow`.
#[tokio::test]
async fn the_redis_outbox_reads_the_keys_the_deployed_handler_wrote() {
    let server = RedisServer::start().unwrap();
    let client = ::redis::Client::open(server.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let () = ::redis::cmd("ZADD")
        .arg("stormgate:servicenow:pending")
        .arg(&["100", r#"{"note":1}"#, "200", r#"{"note":2}"#])
        .query_async(&mut admin)
        .await
        .unwrap();
    let () = ::redis::cmd("SET")
        .arg("stormgate:servicenow:cooldown_until")
        .arg("7000")
        .query_async(&mut admin)
        .await
        .unwrap();
    let outbox = RedisOutbox::new(server.link().unwrap(), "stormgate:servicenow");
    assert_eq!(outbox.pending().await.unwrap(), 2);
    assert_eq!(outbox.cooldown_until().await.unwrap(), EpochMillis(7_000));
    assert_eq!(
        claim(&outbox, 150, 10_000).await.as_deref(),
        Some(r#"{"note":1}"#)
    );
    // The claim wrote back where the deployed handler reads.
    let hold: f64 = ::redis::cmd("ZSCORE")
        .arg("stormgate:servicenow:pending")
        .arg(r#"{"note":1}"#)
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(hold, 10_000.0);
}
