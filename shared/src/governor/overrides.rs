//! The governor under the operators' controls ([`crate::controls`]): a deployment marked
//! down admits nothing (its work spills, as after a daily quota), and an overriding TPM
//! or headroom recomputes the deployment's window limits, for as long as the control
//! holds. The `dispatch` tick and each tier invocation read the controls once and admit
//! through [`Governor::with_controls`]; the ledger underneath is shared, so the override
//! takes effect fleet-wide on the next tick and reverts by itself with the control.

use std::time::Duration;

use super::{Configured, DeploymentBudget, Governor, GovernorError, WindowLimits};
use crate::clock::EpochMillis;
use crate::controls::ControlState;
use crate::deployment_name::DeploymentName;

/// How far ahead a down mark without an end is stated (admissions answer
/// `Down { until }`): it is read again every tick, so this only has to outlast a tick.
const OPEN_DOWN_MARK: Duration = Duration::from_secs(3600);

impl Governor {
    /// This governor with the controls in force at `now` applied. Cheap: it shares the
    /// ledger; only the per-deployment limits are recomputed.
    pub fn with_controls(&self, controls: &ControlState, now: EpochMillis) -> Governor {
        let mut governor = self.clone();
        for (name, configured) in governor.deployments.iter_mut() {
            let control = controls.deployment(name);
            if control.tpm().is_none() && control.headroom().is_none() {
                continue;
            }
            let budget = match control.tpm() {
                Some(tpm) => configured.budget.with_tpm(tpm),
                None => configured.budget.clone(),
            };
            let headroom = control.headroom().unwrap_or(self.policy.headroom);
            let limits =
                WindowLimits::for_budget(&budget, headroom, self.policy.window, self.policy.burst);
            *configured = Configured { budget, limits };
        }
        governor.marked_down = controls
            .deployments
            .iter()
            .filter_map(|(name, control)| {
                let down = control.down.as_ref()?;
                Some((
                    name.clone(),
                    down.until.unwrap_or_else(|| now.plus(OPEN_DOWN_MARK)),
                ))
            })
            .collect();
        governor
    }

    /// The budget a deployment is governed by (the configured one, or the override).
    pub fn budget(&self, deployment: &DeploymentName) -> Option<&DeploymentBudget> {
        self.deployments.get(deployment).map(|c| &c.budget)
    }

    /// Until when an operator marked `deployment` down, if so.
    pub fn marked_down_until(&self, deployment: &DeploymentName) -> Option<EpochMillis> {
        self.marked_down.get(deployment).copied()
    }

    /// Every configured deployment.
    pub fn deployments(&self) -> impl Iterator<Item = &DeploymentBudget> {
        self.deployments.values().map(|c| &c.budget)
    }

    /// Ends the deployment's cooldown and down time in the shared ledger (an operator
    /// marked it up).
    pub async fn clear_throttle(&self, deployment: &DeploymentName) -> Result<(), GovernorError> {
        self.configured(deployment)?;
        Ok(self.ledger.clear_throttle(deployment).await?)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::controls::{ControlKey, Setting};
    use crate::governor::{Admission, GovernorPolicy, MemoryLedger};
    use crate::job::Tier;
    use crate::tokens::Tokens;

    fn governor() -> (Governor, DeploymentName) {
        let d: DeploymentName = "premium".parse().unwrap();
        let budget = DeploymentBudget {
            tier: Tier::Premium,
            deployment: d.clone(),
            tpm: 60_000,
            rpm: 360,
        };
        let g = Governor::new(
            Arc::new(MemoryLedger::new()),
            GovernorPolicy::default(),
            [budget],
        );
        (g, d)
    }

    fn setting(until: Option<u64>, value: Option<f64>) -> Setting {
        Setting {
            by: "alice".into(),
            at: EpochMillis(0),
            until: until.map(EpochMillis),
            value,
        }
    }

    #[tokio::test]
    async fn a_tpm_override_changes_the_limits_and_a_down_mark_stops_admission() {
        let (g, d) = governor();
        let now = EpochMillis(1_000);
        let before = g.limits(&d).unwrap();
        let settings = BTreeMap::from([
            (
                ControlKey::Tpm(d.clone()),
                setting(Some(60_000), Some(6_000.0)),
            ),
            (
                ControlKey::Headroom(d.clone()),
                setting(Some(60_000), Some(0.5)),
            ),
        ]);
        let state = ControlState::from_settings(&settings, now);
        let overridden = g.with_controls(&state, now);
        let after = overridden.limits(&d).unwrap();
        assert_eq!(after.minute_tokens, 3_000, "6,000 TPM at 50 % headroom");
        assert_eq!(before.minute_tokens, 54_000);
        assert_eq!(overridden.budget(&d).unwrap().tpm, 6_000);
        // The original is untouched.
        assert_eq!(g.limits(&d).unwrap(), before);

        let down = BTreeMap::from([(ControlKey::Down(d.clone()), setting(None, None))]);
        let state = ControlState::from_settings(&down, now);
        let marked = g.with_controls(&state, now);
        assert!(matches!(
            marked.admit(&d, Tokens(10), now).await.unwrap(),
            Admission::Down { .. }
        ));
        assert!(matches!(
            g.admit(&d, Tokens(10), now).await.unwrap(),
            Admission::Admitted(_)
        ));
    }

    #[tokio::test]
    async fn marking_up_ends_a_daily_quota_down_time() {
        let (g, d) = governor();
        let now = EpochMillis(1_000);
        g.report_throttle(&d, Duration::from_secs(86_400), now)
            .await
            .unwrap();
        assert!(matches!(
            g.admit(&d, Tokens(10), now).await.unwrap(),
            Admission::Down { .. }
        ));
        g.clear_throttle(&d).await.unwrap();
        assert!(matches!(
            g.admit(&d, Tokens(10), now).await.unwrap(),
            Admission::Admitted(_)
        ));
    }
}
