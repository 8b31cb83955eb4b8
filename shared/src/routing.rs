//! Routing with evidence: the severity a ticket's work is routed at, and where it queues.
//!
//! ServiceNow's priority is the floor: the classifier may raise a ticket, never lower it.
//! How far it may raise it depends on what the ticket shows:
//!
//! - **Uncertainty alone** (the model's route-up, [`crate::classifier::route_up`], finds a
//!   more severe class likely enough) lifts a ticket **one level** above ServiceNow's
//!   priority at most. A ticket with nothing but default impact and urgency is the model's
//!   least informed guess; unbounded, such tickets were routed P2 by the hundred and
//!   filled the premium deployment.
//! - **Evidence** lets the route-up go further: customers reported affected, ServiceNow
//!   impact High, or outage alarms (dying gasp, loss of light, mains power or battery).
//!   These are facts of the ticket, not of the model, so a storm ticket whose priority is
//!   ServiceNow's default but whose log shows a site on battery still reaches premium.
//!
//! The classifier's own "severe network outage" reason for customer impact is not evidence
//! here: it is derived from the model's routing, so it would let the model vouch for itself.
//!
//! Where a job queues ([`Routing::queue_rank`]) is a separate, deliberate choice. A
//! technician summary queues at **ServiceNow's priority** within its tier, whatever it was
//! routed at: when the premium deployment is the bottleneck, the tickets ServiceNow itself
//! rates P1/P2 go first and lifted ones take what is left (and spill to standard at their
//! deadline, which their routing set). A customer notice queues **one level below** its
//! ticket's routing severity: the customer already has the instant extractive notice and a
//! deadline of minutes, while a P1/P2 technician summary spilled to the standard
//! deployment has seconds left, so on the shared standard deployment a technician summary
//! goes before the customer notice of the same severity.

use serde::{Deserialize, Serialize};

use crate::classifier::Prediction;
use crate::classifier::features::{AlarmClass, FeatureInput};
use crate::job::SummaryKind;
use crate::severity::Severity;
use crate::ticket::Level;

/// The alarm classes that count as evidence of an outage on their own.
pub const OUTAGE_ALARMS: [AlarmClass; 3] = [
    AlarmClass::DyingGasp,
    AlarmClass::LossOfLight,
    AlarmClass::PowerOrBattery,
];

/// The facts of a ticket that let the classifier lift it more than one level (any one
/// is enough).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Evidence {
    /// `u_customers_affected` (or the mapped field) is above zero.
    pub customers_reported: bool,
    /// ServiceNow impact 1 - High.
    pub high_impact: bool,
    /// Dying gasp, loss of light, or mains power / battery alarms in the log or journal.
    pub outage_alarms: bool,
}

impl Evidence {
    pub fn any(&self) -> bool {
        self.customers_reported || self.high_impact || self.outage_alarms
    }
}

/// Why a ticket is routed at its severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "basis", content = "evidence", rename_all = "snake_case")]
pub enum RoutingBasis {
    /// At ServiceNow's priority: the model found nothing more severe likely enough.
    ServiceNow,
    /// One level above ServiceNow's priority on the model's uncertainty alone (the route-up
    /// may have asked for more; without evidence it gets one level).
    Uncertainty,
    /// Above ServiceNow's priority as far as the route-up asked, on this evidence.
    Evidence(Evidence),
}

/// Where a ticket's work is routed, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    /// The severity deadlines and tiers are chosen by.
    pub severity: Severity,
    /// ServiceNow's own priority: the floor.
    pub servicenow: Severity,
    pub basis: RoutingBasis,
}

impl Routing {
    /// At ServiceNow's priority, nothing lifted (tickets routed before this rule existed).
    pub fn at_servicenow(servicenow: Severity) -> Routing {
        Routing {
            severity: servicenow,
            servicenow,
            basis: RoutingBasis::ServiceNow,
        }
    }

    /// Routed above ServiceNow's priority.
    pub fn lifted(&self) -> bool {
        self.severity < self.servicenow
    }

    /// The severity a job of `kind` queues and ages at within its tier (see the module docs):
    /// a technician summary at ServiceNow's priority (so a lifted one queues behind every
    /// ticket ServiceNow rates more severe), a customer notice one level below its routing.
    pub fn queue_rank(&self, kind: SummaryKind) -> Severity {
        match kind {
            SummaryKind::Customer => one_level_down(self.severity),
            SummaryKind::Technician => self.servicenow,
        }
    }
}

/// The evidence the ticket carries, if any.
pub fn evidence_of(input: &FeatureInput<'_>) -> Option<Evidence> {
    let evidence = Evidence {
        customers_reported: input.customers_affected.is_some_and(|n| n > 0),
        high_impact: input.impact == Some(Level::High),
        outage_alarms: OUTAGE_ALARMS.iter().any(|&c| input.alarms.get(c) > 0),
    };
    evidence.any().then_some(evidence)
}

/// Routes a ticket: ServiceNow's priority as the floor, the model's route-up bounded to
/// one level without evidence (see the module docs).
pub fn route(servicenow: Severity, model_routing: Severity, evidence: Option<Evidence>) -> Routing {
    if model_routing >= servicenow {
        return Routing::at_servicenow(servicenow);
    }
    match evidence {
        Some(e) => Routing {
            severity: model_routing,
            servicenow,
            basis: RoutingBasis::Evidence(e),
        },
        None => Routing {
            severity: model_routing.max(one_level_up(servicenow)),
            servicenow,
            basis: RoutingBasis::Uncertainty,
        },
    }
}

/// [`route`] for a ticket the classifier has seen.
pub fn route_ticket(
    servicenow: Severity,
    prediction: &Prediction,
    input: &FeatureInput<'_>,
) -> Routing {
    route(servicenow, prediction.routing, evidence_of(input))
}

fn one_level_up(s: Severity) -> Severity {
    Severity::from_rank(s.rank().saturating_sub(1).max(1)).unwrap_or(Severity::P1)
}

fn one_level_down(s: Severity) -> Severity {
    Severity::from_rank((s.rank() + 1).min(5)).unwrap_or(Severity::P5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn severity() -> impl Strategy<Value = Severity> {
        prop::sample::select(Severity::ALL.to_vec())
    }

    fn evidence() -> impl Strategy<Value = Option<Evidence>> {
        prop::option::of(
            (any::<bool>(), any::<bool>(), any::<bool>())
                .prop_filter("some evidence", |e| e.0 || e.1 || e.2)
                .prop_map(
                    |(customers_reported, high_impact, outage_alarms)| Evidence {
                        customers_reported,
                        high_impact,
                        outage_alarms,
                    },
                ),
        )
    }

    const ALARMS: Evidence = Evidence {
        customers_reported: false,
        high_impact: false,
        outage_alarms: true,
    };

    #[test]
    fn a_sparse_p4_the_model_calls_p1_is_lifted_one_level_and_queues_as_a_p4() {
        let r = route(Severity::P4, Severity::P1, None);
        assert_eq!(r.severity, Severity::P3);
        assert_eq!(r.basis, RoutingBasis::Uncertainty);
        assert_eq!(r.queue_rank(SummaryKind::Technician), Severity::P4);
        assert_eq!(r.queue_rank(SummaryKind::Customer), Severity::P4);
    }

    #[test]
    fn evidence_lets_the_route_up_go_all_the_way() {
        let r = route(Severity::P4, Severity::P1, Some(ALARMS));
        assert_eq!(r.severity, Severity::P1);
        assert_eq!(r.basis, RoutingBasis::Evidence(ALARMS));
        assert_eq!(r.queue_rank(SummaryKind::Technician), Severity::P4);
    }

    #[test]
    fn a_ticket_not_lifted_queues_at_its_own_priority() {
        let r = route(Severity::P2, Severity::P3, Some(ALARMS));
        assert_eq!(r, Routing::at_servicenow(Severity::P2));
        assert_eq!(r.queue_rank(SummaryKind::Technician), Severity::P2);
        assert_eq!(r.queue_rank(SummaryKind::Customer), Severity::P3);
        let p5 = Routing::at_servicenow(Severity::P5);
        assert_eq!(p5.queue_rank(SummaryKind::Customer), Severity::P5);
    }

    proptest! {
        #[test]
        fn servicenow_is_the_floor_and_uncertainty_lifts_one_level_at_most(
            servicenow in severity(),
            model in severity(),
            evidence in evidence(),
        ) {
            let r = route(servicenow, model, evidence);
            prop_assert!(r.severity <= servicenow);
            prop_assert!(r.severity >= model.min(servicenow));
            if evidence.is_none() {
                prop_assert!(servicenow.rank() - r.severity.rank() <= 1);
            }
            // A lifted technician summary never queues ahead of one ServiceNow rates more severe.
            prop_assert_eq!(r.queue_rank(SummaryKind::Technician), servicenow);
            prop_assert!(r.queue_rank(SummaryKind::Customer) > r.severity.min(Severity::P4));
        }
    }
}
