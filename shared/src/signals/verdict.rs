//! The verdict: the status in one line a NOC manager reads at a glance ("keeping up",
//! "P3 summaries 4 min behind", "premium down, spilling to standard").
//!
//! A pure function of the status: every reason that holds, most serious first, joined
//! into one line; the level is the most serious reason's. Down deployments and P1/P2
//! summaries past their deadline are critical; a lower severity behind, a paused or
//! forced tier, a cooldown, consumer lag and a filling Redis are warnings.

use super::status::{DeploymentState, KEEPING_UP, Level, Reason, Status, Verdict};
use crate::job::Tier;
use crate::severity::Severity;

/// Consumer lag from which ingest counts as behind.
pub const LAG_BEHIND_MS: u64 = 120_000;
/// Partitions measured longer ago than this say nothing about the lag now.
pub const LAG_FRESH_MS: u64 = 300_000;
/// Redis memory use, in percent of `maxmemory`, that warns and that is critical.
pub const REDIS_WARNING_PERCENT: u64 = 80;
pub const REDIS_CRITICAL_PERCENT: u64 = 90;

/// Reads the status into one line. See the module docs.
pub fn verdict(status: &Status) -> Verdict {
    let mut reasons = Vec::new();
    let mut push = |level: Level, text: String| reasons.push(Reason { level, text });

    let down: Vec<_> = status
        .deployments
        .iter()
        .filter(|d| d.state.is_down())
        .collect();
    let llm_deployments = status
        .deployments
        .iter()
        .filter(|d| Tier::LLM.contains(&d.tier))
        .count();
    if !down.is_empty() && down.len() == llm_deployments {
        let tiers: Vec<&str> = down.iter().map(|d| d.tier.as_str()).collect();
        push(
            Level::Critical,
            format!("{} down: every summary extractive", tiers.join(" and ")),
        );
    } else {
        for d in &down {
            let mut text = format!("{} down, spilling to {}", d.tier, d.tier.spill());
            if let DeploymentState::MarkedDown { mark } = &d.state {
                text.push_str(&format!(" (marked down by {})", mark.by));
            }
            push(Level::Critical, text);
        }
    }

    for s in status.severities.iter().filter(|s| s.behind_ms > 0) {
        let level = if s.severity <= Severity::P2 {
            Level::Critical
        } else {
            Level::Warning
        };
        push(
            level,
            format!("{} summaries {} behind", s.severity, human(s.behind_ms)),
        );
    }

    for q in &status.queues {
        if let Some(mark) = &status.controls.tier(q.tier).paused {
            push(Level::Warning, format!("{} paused by {}", q.tier, mark.by));
        }
        if let Some(mark) = &status.controls.tier(q.tier).extractive_only {
            push(
                Level::Warning,
                format!("{} forced to extractive by {}", q.tier, mark.by),
            );
        }
    }

    for d in &status.deployments {
        if let DeploymentState::CoolingDown { until } = d.state {
            push(
                Level::Warning,
                format!(
                    "{} throttled (429), cooling down {}",
                    d.tier,
                    human(until.0.saturating_sub(status.at.0))
                ),
            );
        }
    }

    let lag = status
        .ingest
        .lag
        .partitions
        .iter()
        .filter(|p| p.age_ms <= LAG_FRESH_MS)
        .map(|p| p.lag.max_ms)
        .max()
        .unwrap_or(0);
    if lag >= LAG_BEHIND_MS {
        push(
            Level::Warning,
            format!("ingest {} behind Kafka", human(lag)),
        );
    }

    if let Some(percent) = status.redis.and_then(|r| r.used_memory_percent) {
        if percent >= REDIS_CRITICAL_PERCENT {
            push(Level::Critical, format!("Redis memory {percent} % full"));
        } else if percent >= REDIS_WARNING_PERCENT {
            push(Level::Warning, format!("Redis memory {percent} % full"));
        }
    }

    // Most serious first; within a level, in the order above.
    reasons.sort_by_key(|r| std::cmp::Reverse(r.level));
    let level = reasons.first().map_or(Level::Ok, |r| r.level);
    let text = if reasons.is_empty() {
        KEEPING_UP.to_owned()
    } else {
        reasons
            .iter()
            .map(|r| r.text.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    };
    Verdict {
        level,
        text,
        reasons,
    }
}

/// A duration for people: "45 s", "4 min", "2 h 5 min".
pub fn human(ms: u64) -> String {
    let secs = ms / 1000;
    if secs < 60 {
        format!("{} s", secs.max(1))
    } else if secs < 3600 {
        format!("{} min", secs / 60)
    } else {
        let minutes = (secs % 3600) / 60;
        if minutes == 0 {
            format!("{} h", secs / 3600)
        } else {
            format!("{} h {} min", secs / 3600, minutes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::EpochMillis;
    use crate::controls::{ControlState, Setting, TierControls};
    use crate::signals::PartitionLag;
    use crate::signals::status::*;
    use crate::store::DeadLetterStats;

    fn deployment(tier: Tier, state: DeploymentState) -> DeploymentStatus {
        DeploymentStatus {
            tier,
            deployment: format!("{tier}-d").parse().unwrap(),
            model: "m".into(),
            state,
            tpm: 1_000,
            rpm: 6,
            headroom: 0.1,
            tpm_override: None,
            headroom_override: None,
            window: WindowStatus {
                window_ms: 10_000,
                tokens: 0,
                token_limit: 300,
                requests: 0,
                request_limit: 1,
            },
            minute_tokens: 0,
            minute_token_limit: 900,
            requests_per_minute: 0,
            admitted_total: 0,
            throttles_per_minute: 0,
            throttles_total: 0,
            spilled_per_minute: 0,
            today: UsageToday {
                prompt_tokens: 0,
                completion_tokens: 0,
                calls: 0,
                spend_usd: 0.0,
            },
            paused: false,
            extractive_only: false,
        }
    }

    fn severity(severity: Severity, behind_ms: u64) -> SeverityStatus {
        SeverityStatus {
            severity,
            queued: 1,
            held: 0,
            in_flight: 0,
            oldest_age_ms: Some(1),
            oldest_allowed_ms: Some(1),
            deadline_ms: 30_000,
            behind_ms,
        }
    }

    fn queue(tier: Tier) -> QueueStatus {
        QueueStatus {
            tier,
            paused: false,
            extractive_only: false,
            pending: 0,
            held: 0,
            leased: 0,
            top: Vec::new(),
        }
    }

    fn status() -> Status {
        Status {
            at: EpochMillis(1_000_000),
            at_utc: String::new(),
            rates_minute: EpochMillis(900_000),
            verdict: Verdict::default(),
            ingest: IngestStatus::default(),
            severities: Severity::ALL.iter().map(|&s| severity(s, 0)).collect(),
            queues: vec![queue(Tier::Premium), queue(Tier::Standard)],
            deployments: vec![
                deployment(Tier::Premium, DeploymentState::Ok),
                deployment(Tier::Standard, DeploymentState::Ok),
            ],
            summaries: SummariesStatus::default(),
            sinks: SinksStatus::default(),
            dead_letters: DeadLetterStats::default(),
            redis: None,
            controls: ControlState::default(),
            audit: Vec::new(),
            audit_trimmed_total: 0,
        }
    }

    #[test]
    fn a_quiet_pipeline_is_keeping_up() {
        let v = verdict(&status());
        assert_eq!(v.text, "keeping up");
        assert_eq!(v.level, Level::Ok);
    }

    #[test]
    fn a_lower_severity_behind_its_deadline_warns_with_how_far() {
        let mut s = status();
        s.severities[2].behind_ms = 4 * 60_000 + 20_000;
        let v = verdict(&s);
        assert_eq!(v.text, "P3 summaries 4 min behind");
        assert_eq!(v.level, Level::Warning);
        s.severities[0].behind_ms = 12_000;
        let v = verdict(&s);
        assert_eq!(v.level, Level::Critical);
        assert_eq!(
            v.text,
            "P1 summaries 12 s behind; P3 summaries 4 min behind"
        );
    }

    #[test]
    fn a_deployment_down_says_where_its_work_goes() {
        let mut s = status();
        s.deployments[0].state = DeploymentState::Down {
            until: EpochMillis(9_000_000),
        };
        let v = verdict(&s);
        assert_eq!(v.text, "premium down, spilling to standard");
        assert_eq!(v.level, Level::Critical);

        s.deployments[1].state = DeploymentState::MarkedDown {
            mark: Setting {
                by: "alice".into(),
                at: EpochMillis(0),
                until: None,
                value: None,
            },
        };
        assert_eq!(
            verdict(&s).text,
            "premium and standard down: every summary extractive"
        );
        s.deployments[0].state = DeploymentState::Ok;
        assert_eq!(
            verdict(&s).text,
            "standard down, spilling to extractive (marked down by alice)"
        );
    }

    #[test]
    fn controls_cooldowns_lag_and_memory_are_named() {
        let mut s = status();
        let mark = Setting {
            by: "bob".into(),
            at: EpochMillis(0),
            until: None,
            value: None,
        };
        s.controls.tiers.insert(
            Tier::Premium,
            TierControls {
                paused: Some(mark.clone()),
                extractive_only: None,
            },
        );
        s.deployments[1].state = DeploymentState::CoolingDown {
            until: EpochMillis(1_020_000),
        };
        s.ingest.lag.partitions.push(PartitionLagStatus {
            lag: PartitionLag {
                topic: "t".into(),
                partition: 0,
                records: 1,
                p50_ms: 1,
                max_ms: 6 * 60_000,
                measured_at: EpochMillis(999_000),
            },
            age_ms: 1_000,
        });
        s.redis = Some(RedisStatus {
            used_memory: 85,
            maxmemory: 100,
            used_memory_percent: Some(85),
        });
        let v = verdict(&s);
        assert_eq!(
            v.text,
            "premium paused by bob; standard throttled (429), cooling down 20 s; \
             ingest 6 min behind Kafka; Redis memory 85 % full"
        );
        assert_eq!(v.level, Level::Warning);
        s.redis = Some(RedisStatus {
            used_memory: 95,
            maxmemory: 100,
            used_memory_percent: Some(95),
        });
        let v = verdict(&s);
        assert_eq!(v.level, Level::Critical);
        assert!(v.text.starts_with("Redis memory 95 % full; premium paused"));
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human(300), "1 s");
        assert_eq!(human(45_000), "45 s");
        assert_eq!(human(4 * 60_000 + 59_000), "4 min");
        assert_eq!(human(2 * 3_600_000 + 5 * 60_000), "2 h 5 min");
        assert_eq!(human(3_600_000), "1 h");
    }
}
