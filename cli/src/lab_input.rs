//! What the storm lab's commands (`replay`, `plan`) replay: the built-in seed storm, a
//! scenario file, or a ServiceNow export (`--history`) with the options that say how to
//! read it. One definition, so both commands read an export the same way.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use stormgate_lab::history::{DateOrder, History, HistoryOptions, LevelScale, read_history};
use stormgate_lab::scenario::Scenario;

#[derive(Debug, Clone, Args)]
pub struct LabInput {
    /// Scenario file (TOML or JSON); default: the built-in seed storm. With --history it
    /// still gives the quotas and prices.
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Only the first N minutes of the scenario.
    #[arg(long)]
    pub minutes: Option<u64>,
    /// Replay a ServiceNow incident export instead of the scenario's tickets: a CSV
    /// export (list view or the UCI event log) or Table API JSON ({"result": [...]}).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// With --history: replay N times faster than recorded (60: an hour of history per
    /// minute). Holds and deadlines stay in replayed seconds: see docs/storm-lab.md.
    #[arg(long, default_value_t = 60.0)]
    pub time_scale: f64,
    /// With --history: how a/b/yyyy dates are read (auto: decided by the file, refused
    /// when no date tells; day-first; month-first).
    #[arg(long, default_value = "auto")]
    pub date_order: DateOrder,
    /// With --history: the scale of impact and urgency (auto, 3, or 5: 1–2 High, 3
    /// Medium, 4–5 Low).
    #[arg(long, default_value = "auto")]
    pub impact_scale: LevelScale,
    /// With --history: read FIELD from a renamed column, e.g.
    /// --column sys_updated_on="Last updated" (repeatable).
    #[arg(long = "column", value_name = "FIELD=COLUMN", value_parser = parse_mapping)]
    pub columns: Vec<(String, String)>,
}

fn parse_mapping(s: &str) -> Result<(String, String), String> {
    let (field, column) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not FIELD=COLUMN"))?;
    if field.trim().is_empty() || column.trim().is_empty() {
        return Err(format!("{s:?} is not FIELD=COLUMN"));
    }
    Ok((field.trim().to_owned(), column.trim().to_owned()))
}

impl LabInput {
    /// The scenario, shortened when asked.
    pub fn scenario(&self) -> anyhow::Result<Scenario> {
        let mut scenario = match &self.scenario {
            Some(path) => Scenario::from_file(path)?,
            None => Scenario::seed_storm()?,
        };
        if let Some(m) = self.minutes {
            scenario = scenario.truncated(m);
        }
        Ok(scenario)
    }

    /// The export read onto the scenario's start, when one is given.
    pub fn history(&self, scenario: &Scenario) -> anyhow::Result<Option<History>> {
        let Some(path) = &self.history else {
            return Ok(None);
        };
        let file = std::fs::File::open(path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        let options = HistoryOptions {
            date_order: self.date_order,
            level_scale: self.impact_scale,
            columns: self.columns.iter().cloned().collect::<BTreeMap<_, _>>(),
            ..HistoryOptions::new(scenario.start_millis()?, self.time_scale)
        };
        let history = read_history(
            std::io::BufReader::new(file),
            &path.display().to_string(),
            &options,
        )
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(Some(history))
    }
}
