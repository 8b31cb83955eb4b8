//! The control store's conformance suite: every test runs against the in-memory controls
//! and against the Redis ones on a real `redis-server` started for it.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: failing loudly is the point"
)]

use stormgate_shared::clock::EpochMillis;
use stormgate_shared::controls::{AUDIT_CAP, AuditEntry, ControlKey, ControlStore, Setting};
use stormgate_shared::deployment_name::DeploymentName;
use stormgate_shared::job::Tier;

fn entry(at: u64, action: &str, target: &str) -> AuditEntry {
    AuditEntry {
        at: EpochMillis(at),
        by: "alice".into(),
        action: action.into(),
        target: target.into(),
        detail: String::new(),
        source: "test".into(),
    }
}

fn setting(at: u64, until: Option<u64>, value: Option<f64>) -> Setting {
    Setting {
        by: "alice".into(),
        at: EpochMillis(at),
        until: until.map(EpochMillis),
        value,
    }
}

fn premium() -> DeploymentName {
    "premium".parse().unwrap()
}

async fn a_setting_holds_until_cleared_and_each_change_is_audited(controls: &dyn ControlStore) {
    let paused = ControlKey::Paused(Tier::Premium);
    controls
        .change(
            Some(&paused),
            Some(&setting(10, None, None)),
            &entry(10, "pause", "premium"),
        )
        .await
        .unwrap();
    let state = controls.state(EpochMillis(1_000_000)).await.unwrap();
    assert!(state.tier(Tier::Premium).is_paused());
    assert_eq!(state.tier(Tier::Premium).paused.unwrap().by, "alice");
    assert!(!state.tier(Tier::Standard).is_paused());

    controls
        .change(Some(&paused), None, &entry(20, "resume", "premium"))
        .await
        .unwrap();
    assert!(
        !controls
            .state(EpochMillis(1_000_000))
            .await
            .unwrap()
            .tier(Tier::Premium)
            .is_paused()
    );
    let audit = controls.audit(10).await.unwrap();
    let actions: Vec<_> = audit.iter().map(|r| r.entry.action.as_str()).collect();
    assert_eq!(actions, ["resume", "pause"], "newest first");
    assert_eq!(audit[1].entry, entry(10, "pause", "premium"));
    assert_ne!(audit[0].id, audit[1].id);
}

async fn an_override_ends_by_itself_and_its_end_is_audited(controls: &dyn ControlStore) {
    let tpm = ControlKey::Tpm(premium());
    controls
        .change(
            Some(&tpm),
            Some(&setting(0, Some(60_000), Some(5_000.0))),
            &entry(0, "override_tpm", "premium"),
        )
        .await
        .unwrap();
    let before = controls.state(EpochMillis(59_999)).await.unwrap();
    assert_eq!(before.deployment(&premium()).tpm(), Some(5_000));
    let after = controls.state(EpochMillis(60_000)).await.unwrap();
    assert_eq!(after.deployment(&premium()).tpm(), None);
    assert!(
        controls
            .settings(EpochMillis(60_000))
            .await
            .unwrap()
            .is_empty()
    );
    let audit = controls.audit(10).await.unwrap();
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[0].entry.action, "expired");
    assert_eq!(audit[0].entry.by, "stormgate");
    assert_eq!(audit[0].entry.target, "deployment:premium:tpm");
    assert_eq!(audit[0].entry.at, EpochMillis(60_000));
    assert!(
        audit[0].entry.detail.contains("set by alice"),
        "{:?}",
        audit[0]
    );
    // Read again: the end is audited once.
    controls.state(EpochMillis(70_000)).await.unwrap();
    assert_eq!(controls.audit(10).await.unwrap().len(), 2);
}

async fn a_setting_replaced_keeps_only_its_new_end(controls: &dyn ControlStore) {
    let down = ControlKey::Down(premium());
    controls
        .change(
            Some(&down),
            Some(&setting(0, Some(1_000), None)),
            &entry(0, "mark_down", "p"),
        )
        .await
        .unwrap();
    // Marked down again, without an end: it holds past the first end.
    controls
        .change(
            Some(&down),
            Some(&setting(500, None, None)),
            &entry(500, "mark_down", "p"),
        )
        .await
        .unwrap();
    let state = controls.state(EpochMillis(5_000)).await.unwrap();
    assert!(state.deployment(&premium()).down.is_some());
    assert_eq!(
        controls.audit(10).await.unwrap().len(),
        2,
        "no expiry audited"
    );
}

async fn an_entry_alone_changes_nothing_and_the_audit_keeps_its_cap(controls: &dyn ControlStore) {
    for n in 0..(AUDIT_CAP as u64) {
        controls
            .change(None, None, &entry(n, "resummarize", &format!("INC{n:07}")))
            .await
            .unwrap();
    }
    assert_eq!(
        controls.audit_trimmed().await.unwrap(),
        0,
        "at the cap, nothing trimmed"
    );
    for n in (AUDIT_CAP as u64)..(AUDIT_CAP as u64 + 5) {
        controls
            .change(None, None, &entry(n, "resummarize", &format!("INC{n:07}")))
            .await
            .unwrap();
    }
    assert!(controls.settings(EpochMillis(0)).await.unwrap().is_empty());
    let audit = controls.audit(usize::MAX).await.unwrap();
    assert_eq!(audit.len(), AUDIT_CAP);
    assert_eq!(audit[0].entry.target, format!("INC{:07}", AUDIT_CAP + 4));
    assert_eq!(audit[AUDIT_CAP - 1].entry.target, format!("INC{:07}", 5));
    assert_eq!(controls.audit(3).await.unwrap().len(), 3);
    // What the cap dropped is counted, not silent.
    assert_eq!(controls.audit_trimmed().await.unwrap(), 5);
}

macro_rules! conformance {
    ($($test:ident),* $(,)?) => {
        mod memory {
            use stormgate_shared::controls::memory::MemoryControls;
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(&MemoryControls::new()).await;
                }
            )*
        }

        mod redis {
            use stormgate_shared::controls::redis::RedisControls;
            use stormgate_shared::testing::redis_server::RedisServer;
            $(
                #[tokio::test]
                async fn $test() {
                    let server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
                    let link = server.link().unwrap_or_else(|e| panic!("{e}"));
                    let controls = RedisControls::new(link, &"conformance".parse().unwrap());
                    super::$test(&controls).await;
                }
            )*
        }
    };
}

conformance!(
    a_setting_holds_until_cleared_and_each_change_is_audited,
    an_override_ends_by_itself_and_its_end_is_audited,
    a_setting_replaced_keeps_only_its_new_end,
    an_entry_alone_changes_nothing_and_the_audit_keeps_its_cap,
);
