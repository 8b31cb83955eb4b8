//! Why a ticket was routed where it was, for the read API: ServiceNow's priority, what the
//! classifier predicted and how sure it was, whether its route-up rule raised the ticket
//! (uncertainty rounds toward more care), the severity work was routed at (the more severe
//! of the priority and the classifier's routing), and the tier each summary goes to.

use serde::{Deserialize, Serialize};

use crate::classifier::CustomerImpact;
use crate::ingest::tier_for;
use crate::job::{SummaryKind, Tier};
use crate::severity::Severity;
use crate::snapshot::TicketSnapshot;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutingExplanation {
    /// ServiceNow's priority, as the ticket said.
    pub servicenow_priority: Severity,
    /// The classifier's most likely severity, its probability, and all five (P1 first).
    pub predicted: Severity,
    pub confidence: f32,
    pub probabilities: [f32; 5],
    /// The classifier's routing after its route-up rule, and whether the rule raised it
    /// above the most likely severity.
    pub classifier_routing: Severity,
    pub routed_up: bool,
    /// What work was routed at: the more severe of the priority and the classifier's routing.
    pub routing: Severity,
    /// Whether the classifier made the ticket more urgent than ServiceNow said.
    pub raised_above_priority: bool,
    pub customer_impact: CustomerImpact,
    /// The tier the technician summary goes to (none for a closed ticket), and the
    /// customer one (none when customers are not affected).
    pub technician_tier: Option<Tier>,
    pub customer_tier: Option<Tier>,
    /// The same in one sentence.
    pub reason: String,
}

/// Explains a stored snapshot's routing; `premium_up_to` is the ingest policy's.
pub fn explain(snapshot: &TicketSnapshot, premium_up_to: Severity) -> RoutingExplanation {
    let p = &snapshot.prediction;
    let priority = snapshot.ticket.severity;
    let routed_up = p.routing < p.most_likely;
    let raised = snapshot.routing < priority;
    let technician_tier = (!snapshot.ticket.is_closed())
        .then(|| tier_for(SummaryKind::Technician, snapshot.routing, premium_up_to));
    let customer_tier = snapshot
        .customer_impacting
        .then(|| tier_for(SummaryKind::Customer, snapshot.routing, premium_up_to));

    let mut reason = format!(
        "ServiceNow priority {priority}; the classifier predicted {} ({:.0} %)",
        p.most_likely,
        p.confidence * 100.0
    );
    if routed_up {
        reason.push_str(&format!(
            " and routed it up to {} (too uncertain to rule out the more severe class)",
            p.routing
        ));
    }
    if raised {
        reason.push_str(&format!(", so it was routed as {}", snapshot.routing));
    } else {
        reason.push_str(&format!(", so it kept its priority {priority}"));
    }
    match technician_tier {
        Some(tier) => reason.push_str(&format!("; technician summary on {tier}")),
        None => reason.push_str("; closed: no technician summary"),
    }
    match customer_tier {
        Some(tier) => reason.push_str(&format!(", customer notice on {tier}")),
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
        raised_above_priority: raised,
        customer_impact: p.customer_impact,
        technician_tier,
        customer_tier,
        reason,
    }
}
