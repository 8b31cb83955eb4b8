//! Which sinks the deployment has configured, hence what a stored summary owes beyond
//! the store: every path that settles a job (the tier worker, the extractive settlement)
//! reads it when it stores a summary, and [`crate::sinks`] delivers what was owed.

use serde::{Deserialize, Serialize};

use crate::job::SummaryKind;

/// Which deliveries a stored summary owes: what the deployment has configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sinks {
    /// Customer summaries go to the notifications topic as customer notices.
    pub notices: bool,
    /// Technician summaries go to ServiceNow as work notes.
    pub work_notes: bool,
}

impl Sinks {
    /// Nothing beyond the store (the storm lab, tests of the summarizers alone).
    pub const NONE: Sinks = Sinks {
        notices: false,
        work_notes: false,
    };

    /// Whether a stored summary of `kind` owes a delivery.
    pub fn owes(self, kind: SummaryKind) -> bool {
        match kind {
            SummaryKind::Customer => self.notices,
            SummaryKind::Technician => self.work_notes,
        }
    }
}
