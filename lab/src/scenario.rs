//! Storm scenarios: what arrives when, as ServiceNow incident events in the product's
//! event contract (docs/ticket-events.md), plus the quotas and prices of the run.
//!
//! A scenario is a file a user copies and edits (`scenarios/seed-storm.toml`; the same
//! text is built in as [`SEED_STORM`]). It describes a load curve in phases (a normal
//! day, a storm ramping tickets to ~6× and, because storm logs are longer, tokens to
//! ~15×, holding for hours, then decaying), outages that produce many related tickets
//! sharing a parent incident and a region, and the deployments' quotas.
//!
//! [`Scenario::plan`] turns it into a deterministic list of [`PlannedEvent`]s (cheap:
//! times, severities, outage membership); [`render_event`] turns one into the JSON a
//! producer flow would publish, with a log of network alarm lines written by this
//! module's own generator in the shapes of IOS-XR, Junos and power-plant alarms.
//! Rendering is on demand, so a replay of tens of thousands of tickets never holds
//! all their logs at once.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::rng::{SplitMix64, fnv1a};
use stormgate_shared::clock::EpochMillis;
use stormgate_shared::severity::Severity;

/// The built-in scenario's text (also shipped as `scenarios/seed-storm.toml`).
pub const SEED_STORM: &str = include_str!("../../scenarios/seed-storm.toml");

/// One deployment a scenario provides, with its prices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeploymentSpec {
    pub deployment: String,
    pub model: String,
    pub tpm: u64,
    /// Requests per minute; the model's ratio in Azure's quota tables when absent
    /// ([`stormgate_shared::model_quota`]: 6 per 1,000 TPM for gpt-4o, 1 for gpt-4.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u64>,
    /// USD per million prompt tokens.
    pub price_input_per_1m: f64,
    /// USD per million completion tokens.
    pub price_output_per_1m: f64,
    #[serde(default = "default_first_token_ms")]
    pub first_token_ms: u64,
    #[serde(default = "default_per_output_token_ms")]
    pub per_output_token_ms: u64,
}

fn default_first_token_ms() -> u64 {
    600
}

fn default_per_output_token_ms() -> u64 {
    12
}

impl DeploymentSpec {
    /// The deployment's requests per minute: as given, else its model's ratio to the TPM.
    pub fn requests_per_minute(&self) -> Result<u64, ScenarioError> {
        self.rpm
            .or_else(|| stormgate_shared::model_quota::default_rpm(&self.model, self.tpm))
            .ok_or_else(|| {
                ScenarioError::Invalid(format!(
                    "deployment {:?}: model {:?} is not in the quota table; give its rpm",
                    self.deployment, self.model
                ))
            })
    }
}

/// A stretch of the day with its load relative to the baseline. Multipliers move
/// linearly from `*_from` to `*_to` across the phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    pub name: String,
    pub minutes: u64,
    pub tickets_from: f64,
    pub tickets_to: f64,
    /// Multiplier of log length (storm logs carry more alarms).
    pub log_from: f64,
    pub log_to: f64,
    /// Share of new tickets that belong to an outage at the phase's start and end.
    #[serde(default)]
    pub outage_share_from: f64,
    #[serde(default)]
    pub outage_share_to: f64,
}

/// Severity mix as weights for P1..P5.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeverityMix {
    pub p1: f64,
    pub p2: f64,
    pub p3: f64,
    pub p4: f64,
    pub p5: f64,
}

impl SeverityMix {
    fn weights(&self) -> [f64; 5] {
        [self.p1, self.p2, self.p3, self.p4, self.p5]
    }
}

/// How tickets look.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TicketShape {
    pub baseline_per_hour: f64,
    /// Alarm lines in a baseline ticket's log (before the phase multiplier).
    pub log_lines_min: u64,
    pub log_lines_max: u64,
    /// Background (non-outage) tickets.
    pub background_mix: SeverityMix,
    /// Tickets that are children of an outage.
    pub outage_child_mix: SeverityMix,
    /// Probability that a ticket gets one later update (a new version with more log).
    pub update_probability: f64,
    pub update_after_minutes_min: u64,
    pub update_after_minutes_max: u64,
}

/// How outages look: one failure, many tickets sharing its parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutageShape {
    pub children_min: u64,
    pub children_max: u64,
    /// Children of one outage arrive within this many minutes of its start.
    pub spread_minutes: u64,
    pub regions: Vec<String>,
}

/// A whole scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// Virtual start, RFC 3339.
    pub start: String,
    pub seed: u64,
    pub premium: DeploymentSpec,
    pub standard: DeploymentSpec,
    /// `max_tokens` a technician summary call sets (both policies).
    pub max_tokens: u32,
    pub tickets: TicketShape,
    pub outages: OutageShape,
    pub phases: Vec<Phase>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {message}")]
    Read { path: String, message: String },
    #[error("scenario is not valid TOML/JSON: {0}")]
    Syntax(String),
    #[error("scenario is inconsistent: {0}")]
    Invalid(String),
}

impl Scenario {
    /// The built-in `seed-storm`.
    pub fn seed_storm() -> Result<Scenario, ScenarioError> {
        Scenario::from_toml(SEED_STORM)
    }

    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Syntax(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// Reads a scenario file: JSON when it ends in `.json`, TOML otherwise.
    pub fn from_file(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        if path.extension().is_some_and(|e| e == "json") {
            let s: Scenario =
                serde_json::from_str(&text).map_err(|e| ScenarioError::Syntax(e.to_string()))?;
            s.validate()?;
            Ok(s)
        } else {
            Scenario::from_toml(&text)
        }
    }

    fn validate(&self) -> Result<(), ScenarioError> {
        if self.phases.is_empty() {
            return Err(ScenarioError::Invalid("no phases".into()));
        }
        if self.outages.regions.is_empty() {
            return Err(ScenarioError::Invalid("outages.regions is empty".into()));
        }
        if self.tickets.log_lines_min > self.tickets.log_lines_max
            || self.outages.children_min > self.outages.children_max
        {
            return Err(ScenarioError::Invalid("a min exceeds its max".into()));
        }
        self.premium.requests_per_minute()?;
        self.standard.requests_per_minute()?;
        self.start_millis()?;
        Ok(())
    }

    pub fn start_millis(&self) -> Result<EpochMillis, ScenarioError> {
        let ts: jiff::Timestamp = self
            .start
            .parse()
            .map_err(|e| ScenarioError::Invalid(format!("start {:?}: {e}", self.start)))?;
        Ok(EpochMillis(u64::try_from(ts.as_millisecond()).unwrap_or(0)))
    }

    pub fn duration_minutes(&self) -> u64 {
        self.phases.iter().map(|p| p.minutes).sum()
    }

    /// Keeps only the first `minutes` of the scenario (tests run a shortened storm).
    pub fn truncated(mut self, minutes: u64) -> Scenario {
        let mut left = minutes;
        self.phases.retain_mut(|p| {
            if left == 0 {
                return false;
            }
            p.minutes = p.minutes.min(left);
            left -= p.minutes;
            true
        });
        self
    }

    /// Shortens every phase by `factor` (0 < factor ≤ 1), keeping the storm's shape.
    pub fn compressed(mut self, factor: f64) -> Scenario {
        for p in &mut self.phases {
            p.minutes = ((p.minutes as f64 * factor).round() as u64).max(1);
        }
        self
    }

    /// The first minute of the phase with the highest ticket multiplier, and its length.
    pub fn peak_window(&self) -> (u64, u64) {
        let peak = self
            .phases
            .iter()
            .map(|p| p.tickets_from.min(p.tickets_to))
            .fold(0.0, f64::max);
        let mut offset = 0;
        for p in &self.phases {
            if p.tickets_from.min(p.tickets_to) >= peak {
                return (offset, p.minutes);
            }
            offset += p.minutes;
        }
        (0, self.duration_minutes())
    }

    /// Multipliers at minute `m`: (tickets, log length, outage share).
    fn load_at(&self, minute: u64) -> (f64, f64, f64) {
        let mut offset = 0;
        for p in &self.phases {
            if minute < offset + p.minutes {
                let f = (minute - offset) as f64 / p.minutes.max(1) as f64;
                let lerp = |a: f64, b: f64| a + (b - a) * f;
                return (
                    lerp(p.tickets_from, p.tickets_to),
                    lerp(p.log_from, p.log_to),
                    lerp(p.outage_share_from, p.outage_share_to),
                );
            }
            offset += p.minutes;
        }
        (0.0, 1.0, 0.0)
    }

    /// The deterministic list of events the scenario produces, in arrival order.
    pub fn plan(&self, seed: u64) -> Result<Vec<PlannedEvent>, ScenarioError> {
        let start = self.start_millis()?;
        let mut rng = SplitMix64::derive(seed, fnv1a(self.name.as_bytes()));
        let mut tickets: Vec<PlannedTicket> = Vec::new();
        let mut open_outage: BTreeMap<String, Outage> = BTreeMap::new();
        let minutes = self.duration_minutes();
        let per_minute = self.tickets.baseline_per_hour / 60.0;
        let mut t_ms: f64 = 0.0;
        let end_ms = (minutes * 60_000) as f64;
        let mut outage_count = 0u64;
        loop {
            let minute = (t_ms / 60_000.0) as u64;
            let (mult, log_mult, outage_share) = self.load_at(minute);
            let rate = (per_minute * mult).max(per_minute * 0.05);
            t_ms += rng.exponential(60_000.0 / rate);
            if t_ms >= end_ms {
                break;
            }
            let at = start.plus(std::time::Duration::from_millis(t_ms as u64));
            let index = tickets.len() as u64;
            let outage = if rng.chance(outage_share) {
                Some(self.join_outage(
                    &mut rng,
                    &mut open_outage,
                    &mut outage_count,
                    at,
                    &mut tickets,
                ))
            } else {
                None
            };
            let severity = self.severity(&mut rng, outage.is_some());
            let lines_base = rng.between(self.tickets.log_lines_min, self.tickets.log_lines_max);
            let log_lines = ((lines_base as f64) * log_mult).round().max(1.0) as u64;
            let region = match &outage {
                Some(o) => o.region.clone(),
                None => rng.pick(&self.outages.regions).cloned().unwrap_or_default(),
            };
            tickets.push(PlannedTicket {
                index,
                at,
                severity,
                region,
                log_lines,
                outage,
                is_parent: false,
            });
        }
        Ok(self.with_updates(seed, tickets))
    }

    /// Finds or opens the outage a new ticket belongs to; a new outage files its
    /// parent ticket first (P1 or P2, many customers).
    fn join_outage(
        &self,
        rng: &mut SplitMix64,
        open: &mut BTreeMap<String, Outage>,
        count: &mut u64,
        at: EpochMillis,
        tickets: &mut Vec<PlannedTicket>,
    ) -> OutageRef {
        let region = rng.pick(&self.outages.regions).cloned().unwrap_or_default();
        let spread = std::time::Duration::from_secs(self.outages.spread_minutes * 60);
        let reuse = open
            .get(&region)
            .filter(|o| o.children_left > 0 && at.since(o.started) < spread)
            .map(|o| o.reference.clone());
        if let Some(reference) = reuse {
            if let Some(o) = open.get_mut(&region) {
                o.children_left -= 1;
            }
            return reference;
        }
        *count += 1;
        let kind = OutageKind::ALL[rng.weighted(&OutageKind::STORM_WEIGHTS).min(2)];
        let parent_index = tickets.len() as u64;
        let reference = OutageRef {
            id: *count,
            kind,
            region: region.clone(),
            parent_index,
            site: format!("{}-{:02}", site_prefix(&region), rng.between(1, 40)),
        };
        tickets.push(PlannedTicket {
            index: parent_index,
            at,
            severity: if rng.chance(0.6) {
                Severity::P1
            } else {
                Severity::P2
            },
            region: region.clone(),
            log_lines: rng.between(20, 60),
            outage: Some(reference.clone()),
            is_parent: true,
        });
        open.insert(
            region,
            Outage {
                started: at,
                children_left: rng.between(self.outages.children_min, self.outages.children_max),
                reference: reference.clone(),
            },
        );
        reference
    }

    fn severity(&self, rng: &mut SplitMix64, in_outage: bool) -> Severity {
        let mix = if in_outage {
            &self.tickets.outage_child_mix
        } else {
            &self.tickets.background_mix
        };
        let i = rng.weighted(&mix.weights());
        Severity::ALL[i.min(4)]
    }

    /// Adds the later versions of tickets that get updated, and sorts by time.
    fn with_updates(&self, seed: u64, tickets: Vec<PlannedTicket>) -> Vec<PlannedEvent> {
        let mut events = Vec::with_capacity(tickets.len() * 2);
        let mut rng = SplitMix64::derive(seed, 0x5550_4441_5445);
        let end = self
            .start_millis()
            .unwrap_or(EpochMillis::ZERO)
            .plus(std::time::Duration::from_secs(self.duration_minutes() * 60));
        for t in tickets {
            if rng.chance(self.tickets.update_probability) {
                let after = rng.between(
                    self.tickets.update_after_minutes_min,
                    self.tickets.update_after_minutes_max,
                );
                let at = t.at.plus(std::time::Duration::from_secs(after * 60));
                if at < end {
                    let resolves = rng.chance(0.4);
                    events.push(PlannedEvent {
                        at,
                        version: 1,
                        resolves,
                        ticket: t.clone(),
                    });
                }
            }
            events.push(PlannedEvent {
                at: t.at,
                version: 0,
                resolves: false,
                ticket: t,
            });
        }
        events.sort_by_key(|e| (e.at, e.ticket.index, e.version));
        events
    }
}

struct Outage {
    started: EpochMillis,
    children_left: u64,
    reference: OutageRef,
}

/// What failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutageKind {
    Power,
    Fibre,
    Routing,
}

impl OutageKind {
    pub const ALL: [OutageKind; 3] = [OutageKind::Power, OutageKind::Fibre, OutageKind::Routing];
    /// A winter storm mostly takes out power, then fibre (falling trees, ice), then routing.
    const STORM_WEIGHTS: [f64; 3] = [0.55, 0.3, 0.15];
}

/// An outage a ticket belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutageRef {
    pub id: u64,
    pub kind: OutageKind,
    pub region: String,
    /// Index of the parent ticket.
    pub parent_index: u64,
    /// The site (central office, hub) that failed.
    pub site: String,
}

/// One ticket of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedTicket {
    pub index: u64,
    pub at: EpochMillis,
    /// The priority ServiceNow carries (impact × urgency).
    pub severity: Severity,
    pub region: String,
    pub log_lines: u64,
    pub outage: Option<OutageRef>,
    pub is_parent: bool,
}

/// One event of the plan: a ticket version arriving at `at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedEvent {
    pub at: EpochMillis,
    /// 0 for the opening version; 1 for the later update.
    pub version: u64,
    /// The update resolves the ticket.
    pub resolves: bool,
    pub ticket: PlannedTicket,
}

impl PlannedEvent {
    /// The ticket's ServiceNow number.
    pub fn number(&self) -> String {
        ticket_number(self.ticket.index)
    }
}

pub fn ticket_number(index: u64) -> String {
    format!("INC{:07}", 3_000_000 + index)
}

/// A 32-hex sys_id derived from the ticket's index and the seed.
pub fn sys_id(seed: u64, index: u64) -> String {
    let mut rng = SplitMix64::derive(seed, index.wrapping_add(0x5359_5349_4400));
    format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64())
}

fn site_prefix(region: &str) -> String {
    region
        .chars()
        .filter(char::is_ascii_alphabetic)
        .take(3)
        .collect::<String>()
        .to_ascii_uppercase()
}

/// impact, urgency for a priority (inverse of ServiceNow's matrix, one choice each).
fn impact_urgency(severity: Severity) -> (u8, u8) {
    match severity {
        Severity::P1 => (1, 1),
        Severity::P2 => (1, 2),
        Severity::P3 => (2, 2),
        Severity::P4 => (2, 3),
        Severity::P5 => (3, 3),
    }
}

fn servicenow_time(t: EpochMillis) -> String {
    match jiff::Timestamp::from_millisecond(t.0 as i64) {
        Ok(ts) => ts.strftime("%Y-%m-%d %H:%M:%S").to_string(),
        Err(_) => "1970-01-01 00:00:00".to_owned(),
    }
}

/// The incident record a producer flow would publish for `event` (docs/ticket-events.md).
pub fn render_event(seed: u64, event: &PlannedEvent) -> Value {
    let t = &event.ticket;
    let mut rng = SplitMix64::derive(seed, t.index.wrapping_mul(31).wrapping_add(event.version));
    let device = device_name(&mut SplitMix64::derive(seed, t.index), t);
    let (impact, urgency) = impact_urgency(t.severity);
    let (category, subcategory, headline) = headline(t, &device);
    let log = alarm_log(&mut rng, t, &device, event);
    let customers = customers_affected(&mut rng, t);
    let state = if event.resolves {
        "6"
    } else if event.version > 0 {
        "2"
    } else {
        "1"
    };
    let mut record = json!({
        "sys_id": sys_id(seed, t.index),
        "number": ticket_number(t.index),
        "sys_mod_count": event.version.to_string(),
        "state": state,
        "priority": t.severity.rank().to_string(),
        "impact": impact.to_string(),
        "urgency": urgency.to_string(),
        "category": category,
        "subcategory": subcategory,
        "cmdb_ci": {"link": format!("https://example.service-now.com/api/now/table/cmdb_ci/{:032x}", fnv1a(device.as_bytes())), "value": device},
        "location": format!("{} {}", t.region, t.outage.as_ref().map(|o| o.site.clone()).unwrap_or_else(|| "CO".into())),
        "u_region": t.region,
        "assignment_group": {"display_value": "NOC Transport Tier 2", "value": "4b1e3c5d9f0a11e8b5670242ac120002"},
        "assigned_to": "Dana Whitfield",
        "opened_at": servicenow_time(t.at),
        "sys_updated_on": servicenow_time(event.at),
        "short_description": headline,
        "description": format!("{headline}. Raised by alarm correlation for {device}."),
        "u_alarm_log": log,
        "u_customers_affected": customers.to_string(),
        "contact_type": "monitoring",
    });
    if let Some(o) = t.outage.as_ref().filter(|_| !t.is_parent)
        && let Value::Object(map) = &mut record
    {
        map.insert(
            "parent_incident".into(),
            json!(ticket_number(o.parent_index)),
        );
    }
    if event.version > 0
        && let Value::Object(map) = &mut record
    {
        let note = if event.resolves {
            "Commercial power restored; all alarms cleared, services verified up. Resolving."
        } else {
            "Field technician dispatched; utility reports crews on site, ETA 3 hours."
        };
        map.insert(
            "work_notes".into(),
            json!(format!(
                "{} - Dana Whitfield (Work notes)\n{note}\n",
                servicenow_time(event.at)
            )),
        );
    }
    record
}

fn device_name(rng: &mut SplitMix64, t: &PlannedTicket) -> String {
    let prefix = site_prefix(&t.region).to_ascii_lowercase();
    let role = *rng.pick(&["ar", "olt", "agg", "pe", "cr"]).unwrap_or(&"ar");
    format!("{prefix}-{role}{:02}.net.example", rng.between(1, 48))
}

fn headline(t: &PlannedTicket, device: &str) -> (&'static str, &'static str, String) {
    match (&t.outage, t.is_parent) {
        (Some(o), true) => match o.kind {
            OutageKind::Power => (
                "Network",
                "Power",
                format!(
                    "Commercial power failure at {} site {}: multiple nodes on battery",
                    o.region, o.site
                ),
            ),
            OutageKind::Fibre => (
                "Network",
                "Fibre",
                format!(
                    "Fibre cut on {} ring at {}: loss of light on trunk spans",
                    o.region, o.site
                ),
            ),
            OutageKind::Routing => (
                "Network",
                "Routing",
                format!(
                    "Core routing instability in {}: BGP/OSPF adjacencies flapping",
                    o.region
                ),
            ),
        },
        (Some(o), false) => match o.kind {
            OutageKind::Power => (
                "Network",
                "Power",
                format!("{device} unreachable, dying gasp received"),
            ),
            OutageKind::Fibre => (
                "Network",
                "Fibre",
                format!("{device} uplink down, loss of signal"),
            ),
            OutageKind::Routing => ("Network", "Routing", format!("{device} BGP session down")),
        },
        (None, _) => match t.severity {
            Severity::P1 | Severity::P2 => (
                "Network",
                "Hardware",
                format!("{device} PSU failure, running on single supply"),
            ),
            Severity::P3 => (
                "Network",
                "Interface",
                format!("{device} interface flapping"),
            ),
            Severity::P4 | Severity::P5 => (
                "Network",
                "Performance",
                format!("{device} intermittent packet loss reported"),
            ),
        },
    }
}

fn customers_affected(rng: &mut SplitMix64, t: &PlannedTicket) -> u64 {
    match (&t.outage, t.is_parent) {
        (Some(_), true) => rng.between(2_000, 40_000),
        (Some(_), false) => rng.between(20, 900),
        (None, _) => match t.severity {
            Severity::P1 => rng.between(100, 2_000),
            Severity::P2 => rng.between(10, 300),
            Severity::P3 => rng.between(0, 20),
            Severity::P4 | Severity::P5 => rng.below(3),
        },
    }
}

/// The alarm log: lines in the shapes of real network gear, with the repetition real
/// alarm storms have (flaps, repeated dying gasps, re-raised battery alarms).
fn alarm_log(
    rng: &mut SplitMix64,
    t: &PlannedTicket,
    device: &str,
    event: &PlannedEvent,
) -> String {
    let lines = if event.version > 0 {
        t.log_lines + t.log_lines / 2
    } else {
        t.log_lines
    };
    let kind = t.outage.as_ref().map(|o| o.kind);
    let mut out = String::new();
    let mut at = t.at.minus(std::time::Duration::from_secs(60 * 20));
    let neighbor = format!(
        "10.{}.{}.{}",
        rng.between(16, 31),
        rng.below(256),
        rng.between(1, 254)
    );
    let asn = 64_512 + rng.below(1_000);
    let port = format!("0/{}/0/{}", rng.below(4), rng.below(36));
    for i in 0..lines {
        at = at.plus(std::time::Duration::from_millis(rng.between(200, 45_000)));
        let stamp = servicenow_time(at);
        let ms = at.0 % 1000;
        let up = i > 0 && i + 2 >= lines && event.resolves;
        let line = match pick_alarm(rng, kind, up) {
            Alarm::LinkDown => format!(
                "RP/0/RP0/CPU0:{device} {stamp}.{ms:03} : ifmgr[{}]: %PKT_INFRA-LINK-3-UPDOWN : Interface HundredGigE{port}, changed state to Down",
                200 + rng.below(100)
            ),
            Alarm::LinkUp => format!(
                "RP/0/RP0/CPU0:{device} {stamp}.{ms:03} : ifmgr[{}]: %PKT_INFRA-LINK-3-UPDOWN : Interface HundredGigE{port}, changed state to Up",
                200 + rng.below(100)
            ),
            Alarm::LineProtoDown => format!(
                "RP/0/RP0/CPU0:{device} {stamp}.{ms:03} : ifmgr[{}]: %PKT_INFRA-LINEPROTO-5-UPDOWN : Line protocol on Interface HundredGigE{port}, changed state to Down",
                200 + rng.below(100)
            ),
            Alarm::LossOfLight => format!(
                "RP/0/RP0/CPU0:{device} {stamp}.{ms:03} : fm[{}]: %PKT_INFRA-FM-2-FAULT_CRITICAL : ALARM_CRITICAL :OPTICS RX LOS LANE-0 :DECLARE :Optics{port}:",
                300 + rng.below(50)
            ),
            Alarm::BgpDown => format!(
                "RP/0/RP0/CPU0:{device} {stamp}.{ms:03} : bgp[1050]: %ROUTING-BGP-5-ADJCHANGE : neighbor {neighbor} Down - BGP Notification sent, hold time expired (VRF: default) (AS: {asn})"
            ),
            Alarm::BgpUp => format!(
                "RP/0/RP0/CPU0:{device} {stamp}.{ms:03} : bgp[1050]: %ROUTING-BGP-5-ADJCHANGE : neighbor {neighbor} Up (VRF: default) (AS: {asn})"
            ),
            Alarm::OspfDown => format!(
                "{stamp} {device} rpd[{}]: RPD_OSPF_NBRDOWN: OSPF neighbor {neighbor} (realm ospf-v2 xe-{} area 0.0.0.0) state changed from Full to Down due to InactivityTimer (event reason: BFD session timed out and neighbor was declared dead)",
                1500 + rng.below(500),
                port.replace("0/", "")
            ),
            Alarm::PowerOnBattery => format!(
                "{stamp} {}-dcplant MAJOR: Commercial AC mains fail, rectifiers off, plant on battery, bus voltage {}.{}V, est. reserve {} min",
                device.split('-').next().unwrap_or("site"),
                48 + rng.below(5),
                rng.below(10),
                30 + rng.below(200)
            ),
            Alarm::DyingGasp => format!(
                "{stamp} {device} GPON: ONT {}/{}/{} DYING-GASP received (loss of power at customer premises), serial ALCL{:08X}",
                rng.below(2),
                rng.below(16),
                rng.between(1, 64),
                rng.next_u64() & 0xFFFF_FFFF
            ),
            Alarm::PsuFailure => format!(
                "RP/0/RP0/CPU0:{device} {stamp}.{ms:03} : envmon[{}]: %PLATFORM-ENVMON-2-PSU_FAIL : Power module 0/PM{} failed: input voltage out of range",
                150 + rng.below(50),
                rng.below(4)
            ),
            Alarm::SnmpLinkDown => format!(
                "{stamp} {device} mib2d[{}]: SNMP_TRAP_LINK_DOWN: ifIndex {}, ifAdminStatus up(1), ifOperStatus down(2), ifName xe-{}",
                2000 + rng.below(900),
                500 + rng.below(60),
                port.replace("0/", "")
            ),
        };
        out.push_str(&line);
        out.push('\n');
        // Alarm storms repeat themselves: the same alarm re-raised within seconds.
        if rng.chance(0.35) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

#[derive(Debug, Clone, Copy)]
enum Alarm {
    LinkDown,
    LinkUp,
    LineProtoDown,
    LossOfLight,
    BgpDown,
    BgpUp,
    OspfDown,
    PowerOnBattery,
    DyingGasp,
    PsuFailure,
    SnmpLinkDown,
}

fn pick_alarm(rng: &mut SplitMix64, kind: Option<OutageKind>, recovering: bool) -> Alarm {
    if recovering {
        return if rng.chance(0.5) {
            Alarm::LinkUp
        } else {
            Alarm::BgpUp
        };
    }
    let table: &[(Alarm, f64)] = match kind {
        Some(OutageKind::Power) => &[
            (Alarm::PowerOnBattery, 3.0),
            (Alarm::DyingGasp, 5.0),
            (Alarm::LinkDown, 2.0),
            (Alarm::BgpDown, 1.0),
            (Alarm::PsuFailure, 1.0),
        ],
        Some(OutageKind::Fibre) => &[
            (Alarm::LossOfLight, 4.0),
            (Alarm::LinkDown, 3.0),
            (Alarm::LineProtoDown, 2.0),
            (Alarm::OspfDown, 1.5),
            (Alarm::BgpDown, 1.5),
        ],
        Some(OutageKind::Routing) => &[
            (Alarm::BgpDown, 4.0),
            (Alarm::BgpUp, 2.0),
            (Alarm::OspfDown, 3.0),
            (Alarm::LinkDown, 1.0),
            (Alarm::LinkUp, 1.0),
        ],
        None => &[
            (Alarm::LinkDown, 2.0),
            (Alarm::LinkUp, 2.0),
            (Alarm::SnmpLinkDown, 2.0),
            (Alarm::PsuFailure, 0.5),
            (Alarm::BgpDown, 0.5),
            (Alarm::LineProtoDown, 1.0),
        ],
    };
    let weights: Vec<f64> = table.iter().map(|(_, w)| *w).collect();
    table
        .get(rng.weighted(&weights))
        .map(|(a, _)| *a)
        .unwrap_or(Alarm::LinkDown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormgate_shared::event::{CdcHeaders, ParseLimits, parse_event};

    #[test]
    fn seed_storm_is_built_in_and_parses() {
        let s = Scenario::seed_storm().unwrap();
        assert_eq!(s.name, "seed-storm");
        assert!(s.duration_minutes() >= 9 * 60);
    }

    #[test]
    fn every_generated_event_is_accepted_by_the_event_parser() {
        let s = Scenario::seed_storm().unwrap().truncated(240);
        let plan = s.plan(7).unwrap();
        assert!(plan.len() > 500);
        for e in plan.iter().step_by(7) {
            let raw = serde_json::to_vec(&render_event(7, e)).unwrap();
            let ticket = parse_event(&raw, &CdcHeaders::default(), ParseLimits::default())
                .unwrap_or_else(|r| panic!("{} rejected: {r}", e.number()));
            assert_eq!(ticket.severity, e.ticket.severity);
            assert_eq!(ticket.version, e.version);
            assert_eq!(ticket.region.as_deref(), Some(e.ticket.region.as_str()));
            assert!(ticket.log_lines().count() as u64 >= e.ticket.log_lines);
        }
    }

    #[test]
    fn same_seed_same_plan_and_events() {
        let s = Scenario::seed_storm().unwrap().truncated(120);
        let a = s.plan(3).unwrap();
        let b = s.plan(3).unwrap();
        assert_eq!(a, b);
        assert_eq!(render_event(3, &a[10]), render_event(3, &b[10]));
        assert_ne!(a, s.plan(4).unwrap());
    }

    #[test]
    fn storm_multiplies_tickets_about_six_and_tokens_about_fifteen() {
        let s = Scenario::seed_storm().unwrap();
        let plan = s.plan(1).unwrap();
        let window = |from: u64, to: u64| {
            let start = s.start_millis().unwrap();
            let lo = start.plus(std::time::Duration::from_secs(from * 60));
            let hi = start.plus(std::time::Duration::from_secs(to * 60));
            let opening: Vec<&PlannedEvent> = plan
                .iter()
                .filter(|e| e.version == 0 && e.at >= lo && e.at < hi)
                .collect();
            let chars: usize = opening
                .iter()
                .map(|e| render_event(1, e)["u_alarm_log"].as_str().unwrap().len())
                .sum();
            (opening.len() as f64, chars as f64)
        };
        let (base_tickets, base_chars) = window(60, 180);
        let peak = s.peak_window();
        let (peak_tickets, peak_chars) = window(peak.0, peak.0 + 120);
        let ticket_ratio = peak_tickets / base_tickets;
        let token_ratio = peak_chars / base_chars;
        assert!(
            (4.5..=7.5).contains(&ticket_ratio),
            "tickets ×{ticket_ratio:.1}"
        );
        assert!(
            (11.0..=19.0).contains(&token_ratio),
            "tokens ×{token_ratio:.1}"
        );
    }

    #[test]
    fn outage_children_share_parent_and_region() {
        let s = Scenario::seed_storm().unwrap();
        let plan = s.plan(5).unwrap();
        let mut by_outage: BTreeMap<u64, Vec<&PlannedTicket>> = BTreeMap::new();
        for e in plan.iter().filter(|e| e.version == 0) {
            if let Some(o) = &e.ticket.outage {
                by_outage.entry(o.id).or_default().push(&e.ticket);
            }
        }
        assert!(by_outage.len() > 20);
        let big = by_outage.values().filter(|v| v.len() >= 5).count();
        assert!(big > 10, "{big} outages with 5+ tickets");
        for tickets in by_outage.values() {
            let parents = tickets.iter().filter(|t| t.is_parent).count();
            assert_eq!(parents, 1);
            assert!(tickets.iter().all(|t| t.region == tickets[0].region));
        }
    }
}
