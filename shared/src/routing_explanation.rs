//! Why a ticket was routed where it was, for the read API: ServiceNow's priority, what the
//! classifier predicted and how sure it was, whether its route-up rule asked for more care,
//! how far the routing rule let it lift the ticket and on what basis ([`crate::routing`]),
//! and the tier table's entry for each summary ([`crate::tier_table`]).

use serde::{Deserialize, Serialize};

use crate::classifier::CustomerImpact;
use crate::job::SummaryKind;
use crate::routing::{Routing, RoutingBasis};
use crate::severity::Severity;
use crate::snapshot::TicketSnapshot;
use crate::tier_table::{TierChoice, TierTable};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutingExplanation {
    /// ServiceNow's priority, as the ticket said: the floor.
    pub servicenow_priority: Severity,
    /// The classifier's most likely severity, its probability, and all five (P1 first).
    pub predicted: Severity,
    pub confidence: f32,
    pub probabilities: [f32; 5],
    /// The classifier's routing after its route-up rule, and whether the rule raised it
    /// above the most likely severity.
    pub classifier_routing: Severity,
    pub routed_up: bool,
    /// What work was routed at: ServiceNow's priority, lifted as the routing rule allows.
    pub routing: Severity,
    /// Why (`servicenow`, `uncertainty`: one level at most, `evidence`: with the facts that
    /// allowed more); absent for tickets stored before the basis was kept.
    pub routing_basis: Option<RoutingBasis>,
    /// Whether the routing is above ServiceNow's priority.
    pub raised_above_priority: bool,
    pub customer_impact: CustomerImpact,
    /// The tier table's entry for the technician summary (none for a closed ticket) and for
    /// the customer notice (none when customers are not affected): `premium`, `standard`,
    /// `premium-when-calm`, `standard-when-calm` or `extractive`.
    #[serde(with = "choice_text")]
    pub technician_tier: Option<TierChoice>,
    #[serde(with = "choice_text")]
    pub customer_tier: Option<TierChoice>,
    /// The same in one sentence.
    pub reason: String,
}

/// Explains a stored snapshot's routing under the ingest policy's tier table.
pub fn explain(snapshot: &TicketSnapshot, tiers: &TierTable) -> RoutingExplanation {
    let p = &snapshot.prediction;
    let priority = snapshot.ticket.severity;
    let routed_up = p.routing < p.most_likely;
    let raised = snapshot.routing < priority;
    let routing = Routing {
        severity: snapshot.routing,
        servicenow: priority,
        basis: snapshot.routing_basis.unwrap_or(if raised {
            RoutingBasis::Uncertainty
        } else {
            RoutingBasis::ServiceNow
        }),
    };
    let technician_tier =
        (!snapshot.ticket.is_closed()).then(|| tiers.choice(SummaryKind::Technician, &routing));
    let customer_tier = snapshot
        .customer_impacting
        .then(|| tiers.choice(SummaryKind::Customer, &routing));

    let mut reason = format!(
        "ServiceNow priority {priority}; the classifier predicted {} ({:.0} %)",
        p.most_likely,
        p.confidence * 100.0
    );
    if routed_up {
        reason.push_str(&format!(
            " and asked for {} (too uncertain to rule out the more severe class)",
            p.routing
        ));
    }
    match (raised, snapshot.routing_basis) {
        (false, _) => reason.push_str(&format!(", so it kept its priority {priority}")),
        (true, Some(RoutingBasis::Evidence(e))) => reason.push_str(&format!(
            ", so it was routed as {} on evidence ({})",
            snapshot.routing,
            evidence_text(&e)
        )),
        (true, Some(_)) => reason.push_str(&format!(
            ", so it was routed as {}, one level above its priority: uncertainty alone lifts no further",
            snapshot.routing
        )),
        (true, None) => reason.push_str(&format!(", so it was routed as {}", snapshot.routing)),
    }
    match technician_tier {
        Some(choice) => reason.push_str(&format!("; technician summary: {choice}")),
        None => reason.push_str("; closed: no technician summary"),
    }
    match customer_tier {
        Some(choice) => reason.push_str(&format!(", customer notice: {choice}")),
        None => reason.push_str(", no customer impact"),
    }
    reason.push('.');

    RoutingExplanation {
        servicenow_priority: priority,
        predicted: p.most_likely,
        confidence: p.confidence,
        probabilities: p.probabilities,
        classifier_routing: p.routing,
        routed_up,
        routing: snapshot.routing,
        routing_basis: snapshot.routing_basis,
        raised_above_priority: raised,
        customer_impact: p.customer_impact,
        technician_tier,
        customer_tier,
        reason,
    }
}

fn evidence_text(e: &crate::routing::Evidence) -> String {
    let mut facts = Vec::new();
    if e.customers_reported {
        facts.push("customers reported affected");
    }
    if e.high_impact {
        facts.push("impact High");
    }
    if e.outage_alarms {
        facts.push("outage alarms");
    }
    facts.join(", ")
}

/// A tier table entry as the table spells it (`standard-when-calm`), as operators set it.
mod choice_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::tier_table::TierChoice;

    pub fn serialize<S: Serializer>(choice: &Option<TierChoice>, s: S) -> Result<S::Ok, S::Error> {
        match choice {
            Some(c) => s.collect_str(c),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TierChoice>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| text.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}
