//! The tier table: which tier serves each summary kind at each routing severity.
//!
//! Three rows, one entry per routing severity P1..P5: technician summaries of tickets
//! routed at ServiceNow's priority (`technician`), technician summaries of tickets the
//! classifier lifted above it (`lifted`, [`crate::routing`]), and customer notices
//! (`customer`). An entry is one of:
//!
//! - `premium`, `standard`: an LLM summary from that deployment (spilled on down the
//!   tiers when it cannot be served before its deadline, as always);
//! - `premium-when-calm`, `standard-when-calm`: an LLM summary from that deployment while
//!   it is calm; while its tokens are contested the job moves down a tier: from premium to
//!   standard (served there like any job), from standard to the extractive summary. The
//!   dispatcher decides when it leases the job ([`crate::dispatcher`], *contested*), so a
//!   ticket queued in a storm and served after it gets its LLM summary;
//! - `extractive`: never an LLM call; the job is still queued so that the dispatcher
//!   settles it like any spilled job (its extractive summary stored with the customer
//!   notice or work note it owes).
//!
//! The default is the seed write-up's: P1/P2 technician summaries on premium, P3 on
//! standard, P4/P5 on standard while it is calm and extractive while it is contested;
//! every customer notice on standard. A lifted ticket gets what the tickets ServiceNow
//! itself rates leave over: premium while premium is calm (else standard), and standard
//! while standard is calm (else extractive), so neither deployment's contested minute goes
//! to the classifier's doubts. The text form (the `STORMGATE_TIER_TABLE` setting):
//!
//! ```text
//! technician=premium,premium,standard,standard-when-calm,standard-when-calm;lifted=premium-when-calm,premium-when-calm,standard-when-calm,standard-when-calm,standard-when-calm;customer=standard,standard,standard,standard,standard
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::job::{LlmUse, SummaryKind, Tier};
use crate::routing::Routing;
use crate::severity::Severity;

/// One entry: the queue a job goes to and when it may use the LLM there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierChoice {
    /// The LLM tier whose queue the job waits in.
    pub tier: Tier,
    pub llm: LlmUse,
}

impl TierChoice {
    pub const PREMIUM: TierChoice = TierChoice {
        tier: Tier::Premium,
        llm: LlmUse::Always,
    };
    pub const STANDARD: TierChoice = TierChoice {
        tier: Tier::Standard,
        llm: LlmUse::Always,
    };
    pub const PREMIUM_WHEN_CALM: TierChoice = TierChoice {
        tier: Tier::Premium,
        llm: LlmUse::WhenCalm(Tier::Premium),
    };
    pub const STANDARD_WHEN_CALM: TierChoice = TierChoice {
        tier: Tier::Standard,
        llm: LlmUse::WhenCalm(Tier::Standard),
    };
    pub const EXTRACTIVE: TierChoice = TierChoice {
        tier: Tier::Standard,
        llm: LlmUse::Never,
    };

    fn as_str(self) -> &'static str {
        match (self.tier, self.llm) {
            (_, LlmUse::Never) => "extractive",
            (Tier::Premium, LlmUse::Always) => "premium",
            (Tier::Premium, LlmUse::WhenCalm(_)) => "premium-when-calm",
            (_, LlmUse::Always) => "standard",
            (_, LlmUse::WhenCalm(_)) => "standard-when-calm",
        }
    }
}

impl FromStr for TierChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "premium" => Ok(TierChoice::PREMIUM),
            "premium-when-calm" => Ok(TierChoice::PREMIUM_WHEN_CALM),
            "standard" => Ok(TierChoice::STANDARD),
            "standard-when-calm" => Ok(TierChoice::STANDARD_WHEN_CALM),
            "extractive" => Ok(TierChoice::EXTRACTIVE),
            other => Err(format!(
                "{other:?} is not premium, premium-when-calm, standard, standard-when-calm or extractive"
            )),
        }
    }
}

/// Severity × kind → tier. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierTable {
    technician: [TierChoice; 5],
    lifted: [TierChoice; 5],
    customer: [TierChoice; 5],
}

/// The table's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    Technician,
    Lifted,
    Customer,
}

impl Row {
    fn as_str(self) -> &'static str {
        match self {
            Row::Technician => "technician",
            Row::Lifted => "lifted",
            Row::Customer => "customer",
        }
    }
}

impl fmt::Display for TierChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TierTableError {
    #[error("row {0:?} is not `technician=...`, `lifted=...` or `customer=...`")]
    BadRow(String),
    #[error("the {row} row is given twice")]
    Repeated { row: Row },
    #[error("the {row} row is missing")]
    Missing { row: Row },
    #[error("the {row} row has {found} entries; it needs 5 (P1 to P5)")]
    Length { row: Row, found: usize },
    #[error("the {row} entry of {severity}: {reason}")]
    Entry {
        row: Row,
        severity: Severity,
        reason: String,
    },
}

impl Default for TierTable {
    fn default() -> Self {
        TierTable {
            technician: [
                TierChoice::PREMIUM,
                TierChoice::PREMIUM,
                TierChoice::STANDARD,
                TierChoice::STANDARD_WHEN_CALM,
                TierChoice::STANDARD_WHEN_CALM,
            ],
            lifted: [
                TierChoice::PREMIUM_WHEN_CALM,
                TierChoice::PREMIUM_WHEN_CALM,
                TierChoice::STANDARD_WHEN_CALM,
                TierChoice::STANDARD_WHEN_CALM,
                TierChoice::STANDARD_WHEN_CALM,
            ],
            customer: [TierChoice::STANDARD; 5],
        }
    }
}

impl TierTable {
    /// The entry for a job of `kind` of a ticket routed as `routing`.
    pub fn choice(&self, kind: SummaryKind, routing: &Routing) -> TierChoice {
        let row = match kind {
            SummaryKind::Technician if routing.lifted() => Row::Lifted,
            SummaryKind::Technician => Row::Technician,
            SummaryKind::Customer => Row::Customer,
        };
        self.entry(row, routing.severity)
    }

    /// One entry of the table.
    pub fn entry(&self, row: Row, severity: Severity) -> TierChoice {
        let entries = match row {
            Row::Technician => &self.technician,
            Row::Lifted => &self.lifted,
            Row::Customer => &self.customer,
        };
        entries[severity.index()]
    }
}

impl FromStr for TierTable {
    type Err = TierTableError;

    fn from_str(s: &str) -> Result<Self, TierTableError> {
        let mut technician = None;
        let mut lifted = None;
        let mut customer = None;
        for text in s.split(';').map(str::trim).filter(|r| !r.is_empty()) {
            let (name, entries) = text
                .split_once('=')
                .ok_or_else(|| TierTableError::BadRow(text.to_owned()))?;
            let (row, slot) = match name.trim() {
                "technician" => (Row::Technician, &mut technician),
                "lifted" => (Row::Lifted, &mut lifted),
                "customer" => (Row::Customer, &mut customer),
                _ => return Err(TierTableError::BadRow(text.to_owned())),
            };
            if slot.is_some() {
                return Err(TierTableError::Repeated { row });
            }
            *slot = Some(parse_row(row, entries)?);
        }
        let missing = |row| TierTableError::Missing { row };
        Ok(TierTable {
            technician: technician.ok_or(missing(Row::Technician))?,
            lifted: lifted.ok_or(missing(Row::Lifted))?,
            customer: customer.ok_or(missing(Row::Customer))?,
        })
    }
}

fn parse_row(row: Row, entries: &str) -> Result<[TierChoice; 5], TierTableError> {
    let parts: Vec<&str> = entries.split(',').collect();
    if parts.len() != 5 {
        return Err(TierTableError::Length {
            row,
            found: parts.len(),
        });
    }
    let mut choices = [TierChoice::STANDARD; 5];
    for ((slot, part), severity) in choices.iter_mut().zip(parts).zip(Severity::ALL) {
        *slot = part.parse().map_err(|reason| TierTableError::Entry {
            row,
            severity,
            reason,
        })?;
    }
    Ok(choices)
}

impl fmt::Display for TierTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = |r: &[TierChoice; 5]| r.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(",");
        write!(
            f,
            "technician={};lifted={};customer={}",
            row(&self.technician),
            row(&self.lifted),
            row(&self.customer)
        )
    }
}

impl Serialize for TierTable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for TierTable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The default table's text form, as the Bicep writes it and the README documents it.
pub const DEFAULT_TIER_TABLE: &str = "technician=premium,premium,standard,standard-when-calm,standard-when-calm;lifted=premium-when-calm,premium-when-calm,standard-when-calm,standard-when-calm,standard-when-calm;customer=standard,standard,standard,standard,standard";

#[cfg(test)]
mod tests {
    use super::*;

    const ROWS: &str = "technician=premium,premium,standard,standard-when-calm,extractive;lifted=premium-when-calm,premium,standard,standard,standard;customer=extractive,standard,standard,standard,standard";

    #[test]
    fn the_default_is_the_seed_write_up_and_its_text_form_round_trips() {
        let table = TierTable::default();
        assert_eq!(table.to_string(), DEFAULT_TIER_TABLE);
        assert_eq!(DEFAULT_TIER_TABLE.parse::<TierTable>(), Ok(table));
        let at = |s| Routing::at_servicenow(s);
        let lifted = |s| crate::routing::route(Severity::P4, s, None);
        use SummaryKind::{Customer, Technician};
        assert_eq!(
            table.choice(Technician, &at(Severity::P2)),
            TierChoice::PREMIUM
        );
        assert_eq!(
            table.choice(Technician, &at(Severity::P3)),
            TierChoice::STANDARD
        );
        assert_eq!(
            table.choice(Technician, &at(Severity::P4)),
            TierChoice::STANDARD_WHEN_CALM
        );
        assert_eq!(
            table.choice(Technician, &lifted(Severity::P1)),
            TierChoice::STANDARD_WHEN_CALM,
            "lifted one level to P3 without evidence"
        );
        assert_eq!(
            table.choice(Customer, &at(Severity::P1)),
            TierChoice::STANDARD
        );
        assert_eq!(
            table.choice(Customer, &lifted(Severity::P1)),
            TierChoice::STANDARD
        );
    }

    #[test]
    fn every_entry_form_parses_with_spaces_and_rows_in_any_order() {
        let spaced = ROWS
            .replace(';', " ; ")
            .replace("customer=", " customer = ");
        let t: TierTable = spaced.parse().unwrap();
        assert_eq!(
            t.entry(Row::Lifted, Severity::P1),
            TierChoice::PREMIUM_WHEN_CALM
        );
        assert_eq!(
            t.entry(Row::Technician, Severity::P5),
            TierChoice::EXTRACTIVE
        );
        assert_eq!(t.entry(Row::Customer, Severity::P1), TierChoice::EXTRACTIVE);
        assert_eq!(t.to_string(), ROWS);
        let reordered: Vec<&str> = ROWS.split(';').rev().collect();
        assert_eq!(reordered.join(";").parse::<TierTable>(), Ok(t));
    }

    #[test]
    fn a_malformed_table_is_refused_naming_what_is_wrong() {
        let err = |s: &str| s.parse::<TierTable>().unwrap_err().to_string();
        let four = ROWS.replace("standard-when-calm,extractive", "extractive");
        assert_eq!(
            err(&four),
            "the technician row has 4 entries; it needs 5 (P1 to P5)"
        );
        let gold = ROWS.replace("lifted=premium-when-calm", "lifted=gold");
        assert_eq!(
            err(&gold),
            "the lifted entry of P1: \"gold\" is not premium, premium-when-calm, standard, standard-when-calm or extractive"
        );
        let no_customer: Vec<&str> = ROWS.split(';').take(2).collect();
        assert_eq!(err(&no_customer.join(";")), "the customer row is missing");
        assert_eq!(
            err(&format!("{ROWS};rollup=standard")),
            "row \"rollup=standard\" is not `technician=...`, `lifted=...` or `customer=...`"
        );
        assert_eq!(
            err(&format!(
                "{ROWS};lifted=premium,premium,premium,premium,premium"
            )),
            "the lifted row is given twice"
        );
    }
}
