//! The local severity classifier: features, model, route-up rule, training and evaluation.
//!
//! A multinomial logistic regression over ServiceNow fields, alarm counts and hashed text
//! (microseconds per ticket, deterministic, no LLM). Its probabilities feed the route-up rule:
//! the routing severity is the most severe class whose cumulative probability (from P1 down)
//! reaches a threshold, never less severe than the most likely class, so uncertainty rounds
//! toward more care. Customer impact is a documented rule over the ticket's facts.

pub mod evaluate;
pub mod example;
pub mod features;
pub mod model;
pub mod synthetic;
pub mod train;

use serde::{Deserialize, Serialize};

use crate::severity::Severity;
use crate::ticket::Level;
use features::{AlarmClass, FeatureInput, extract};
use model::{CLASSES, Model, ModelError};

/// The default model, trained by `stormgate train` (see docs/classifier-report.md).
pub const DEFAULT_MODEL_JSON: &str = include_str!("default_model.json");

/// The default route-up threshold (see docs/classifier-report.md for its evaluation).
pub const DEFAULT_ROUTE_UP_THRESHOLD: f32 = 0.3;

/// Whether and why a ticket affects customers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerImpact {
    pub impacting: bool,
    pub customers: Option<u64>,
    pub reason: ImpactReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImpactReason {
    CustomersReported,
    HighImpact,
    CustomerPremisesLostPower,
    SevereNetworkOutage,
    NoneFound,
}

/// What the classifier says about one ticket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// P1 first.
    pub probabilities: [f32; CLASSES],
    /// The single most likely class.
    pub most_likely: Severity,
    /// What the ticket is routed as, after route-up.
    pub routing: Severity,
    /// Probability of the most likely class.
    pub confidence: f32,
    pub customer_impact: CustomerImpact,
}

/// A loaded model plus the route-up threshold.
#[derive(Debug, Clone)]
pub struct Classifier {
    model: Model,
    route_up_threshold: f32,
}

impl Classifier {
    pub fn new(model: Model, route_up_threshold: f32) -> Classifier {
        Classifier {
            model,
            route_up_threshold: sanitize_threshold(route_up_threshold),
        }
    }

    /// The model embedded in the binary with the default threshold.
    pub fn embedded() -> Result<Classifier, ModelError> {
        Ok(Classifier::new(
            Model::from_json(DEFAULT_MODEL_JSON)?,
            DEFAULT_ROUTE_UP_THRESHOLD,
        ))
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn route_up_threshold(&self) -> f32 {
        self.route_up_threshold
    }

    pub fn predict(&self, input: &FeatureInput<'_>) -> Prediction {
        let probabilities = self.model.probabilities(&extract(input));
        let most_likely = argmax(&probabilities);
        let routing = route_up(&probabilities, self.route_up_threshold);
        Prediction {
            probabilities,
            most_likely,
            routing,
            confidence: probabilities[most_likely.index()],
            customer_impact: customer_impact(input, routing),
        }
    }
}

fn sanitize_threshold(t: f32) -> f32 {
    if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        DEFAULT_ROUTE_UP_THRESHOLD
    }
}

/// The most likely class; ties go to the more severe class.
pub fn argmax(p: &[f32; CLASSES]) -> Severity {
    let mut best = 0;
    for (i, &v) in p.iter().enumerate() {
        if v > p[best] {
            best = i;
        }
    }
    severity_at(best)
}

/// Route-up: the most severe class whose cumulative probability from P1 reaches `threshold`,
/// but never less severe than the most likely class (for high thresholds the cumulative
/// rule alone could land below the argmax).
pub fn route_up(p: &[f32; CLASSES], threshold: f32) -> Severity {
    let mut cumulative = 0.0f32;
    let mut by_cumulative = CLASSES - 1;
    for (i, &v) in p.iter().enumerate() {
        cumulative += if v.is_finite() { v.max(0.0) } else { 0.0 };
        if cumulative >= threshold {
            by_cumulative = i;
            break;
        }
    }
    severity_at(by_cumulative).min(argmax(p))
}

fn severity_at(i: usize) -> Severity {
    Severity::from_rank(u8::try_from(i + 1).unwrap_or(5)).unwrap_or(Severity::P5)
}

/// Customer impact: reported customers, a high ServiceNow impact, customer premises losing
/// power (dying gasp), or a P1/P2 with fibre/link loss. A rule rather than a learned head
/// because no labelled history of customer impact exists; every reason is reported.
pub fn customer_impact(input: &FeatureInput<'_>, routing: Severity) -> CustomerImpact {
    let customers = input.customers_affected;
    let reason = if customers.is_some_and(|n| n > 0) {
        ImpactReason::CustomersReported
    } else if input.impact == Some(Level::High) {
        ImpactReason::HighImpact
    } else if input.alarms.get(AlarmClass::DyingGasp) > 0 {
        ImpactReason::CustomerPremisesLostPower
    } else if routing <= Severity::P2
        && (input.alarms.get(AlarmClass::LossOfLight) > 0
            || input.alarms.get(AlarmClass::LinkDown) > 0)
    {
        ImpactReason::SevereNetworkOutage
    } else {
        ImpactReason::NoneFound
    };
    CustomerImpact {
        impacting: reason != ImpactReason::NoneFound,
        customers,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn unsure_ticket_routes_up() {
        // Most likely P3, but P1+P2 together reach the threshold.
        let p = [0.2, 0.15, 0.4, 0.2, 0.05];
        assert_eq!(argmax(&p), Severity::P3);
        assert_eq!(route_up(&p, 0.3), Severity::P2);
        assert_eq!(route_up(&p, 0.2), Severity::P1);
        assert_eq!(route_up(&p, 0.9), Severity::P3);
    }

    #[test]
    fn embedded_model_loads_and_predicts() {
        let c = Classifier::embedded().unwrap();
        let p = c.predict(&FeatureInput::default());
        let sum: f32 = p.probabilities.iter().sum();
        assert!((sum - 1.0).abs() < 1e-4);
        assert!(p.routing <= p.most_likely);
    }

    proptest! {
        #[test]
        fn route_up_never_yields_a_less_severe_class_than_argmax(
            raw in prop::array::uniform5(0.0f32..1.0),
            threshold in 0.0f32..=1.0,
        ) {
            let sum: f32 = raw.iter().sum();
            let p = if sum > 0.0 { raw.map(|v| v / sum) } else { [0.2; 5] };
            prop_assert!(route_up(&p, threshold) <= argmax(&p));
        }

        #[test]
        fn route_up_is_monotone_in_threshold(
            raw in prop::array::uniform5(0.0f32..1.0),
            a in 0.0f32..=1.0,
            b in 0.0f32..=1.0,
        ) {
            let sum: f32 = raw.iter().sum();
            let p = if sum > 0.0 { raw.map(|v| v / sum) } else { [0.2; 5] };
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(route_up(&p, lo) <= route_up(&p, hi));
        }
    }
}
