//! `stormgate train`: fit the severity classifier from labelled history and write the model
//! file and its evaluation report.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use stormgate_shared::classifier::DEFAULT_ROUTE_UP_THRESHOLD;
use stormgate_shared::classifier::example::TrainingExample;
use stormgate_shared::classifier::synthetic::storm_corpus;
use stormgate_shared::classifier::train::{
    TrainOptions, load_jsonl, load_uci_csv, train_and_evaluate,
};
use stormgate_shared::severity::Severity;

#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    /// Labelled history: a CSV in the UCI incident event log format, or JSONL of training
    /// examples (`.jsonl`/`.json`). Repeat to combine files.
    #[arg(long = "input", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where to write the model (JSON).
    #[arg(long)]
    pub model_out: PathBuf,
    /// Where to write the evaluation report (Markdown).
    #[arg(long)]
    pub report_out: PathBuf,
    /// How many rule-labelled synthetic storm tickets to mix in (they set the alarm and text weights).
    #[arg(long, default_value_t = 3000)]
    pub synthetic_alarms: usize,
    /// Route-up threshold the report evaluates.
    #[arg(long, default_value_t = DEFAULT_ROUTE_UP_THRESHOLD)]
    pub route_up_threshold: f32,
    #[arg(long, default_value_t = TrainOptions::default().epochs)]
    pub epochs: usize,
    #[arg(long, default_value_t = TrainOptions::default().seed)]
    pub seed: u64,
}

pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    let mut examples = Vec::new();
    for path in &args.inputs {
        let loaded = load(path).with_context(|| format!("reading {}", path.display()))?;
        eprintln!("{}: {} labelled incidents", path.display(), loaded.len());
        examples.extend(loaded);
    }
    examples.extend(storm_corpus(args.synthetic_alarms, args.seed));
    let options = TrainOptions {
        epochs: args.epochs,
        seed: args.seed,
        route_up_threshold: args.route_up_threshold,
        ..TrainOptions::default()
    };
    let mut run = train_and_evaluate(&examples, &options)?;
    run.model.trained_on = describe_inputs(args, &examples);
    std::fs::write(&args.model_out, run.model.to_json()?)
        .with_context(|| format!("writing {}", args.model_out.display()))?;
    let report = render_report(
        args,
        &examples,
        &options,
        run.train_examples,
        &run.report.to_markdown(),
    );
    std::fs::write(&args.report_out, report)
        .with_context(|| format!("writing {}", args.report_out.display()))?;
    eprintln!(
        "trained on {} examples, held-out accuracy {:.3}, P1/P2 recall after route-up {:.3}",
        run.train_examples, run.report.accuracy, run.report.route_up.p1_p2_recall
    );
    Ok(())
}

fn load(path: &Path) -> anyhow::Result<Vec<TrainingExample>> {
    let mut reader = BufReader::new(File::open(path)?);
    let is_jsonl = match path.extension().and_then(|e| e.to_str()) {
        Some("jsonl" | "json" | "ndjson") => true,
        Some("csv") => false,
        _ => {
            let mut first = [0u8; 1];
            let n = reader.get_mut().read(&mut first)?;
            reader = BufReader::new(File::open(path)?);
            n == 1 && first[0] == b'{'
        }
    };
    Ok(if is_jsonl {
        load_jsonl(reader)?
    } else {
        load_uci_csv(reader)?
    })
}

fn describe_inputs(args: &TrainArgs, examples: &[TrainingExample]) -> String {
    let files: Vec<String> = args
        .inputs
        .iter()
        .map(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    format!(
        "{} labelled examples from [{}] + {} synthetic storm tickets (seed {}), {} epochs",
        examples.len() - args.synthetic_alarms.min(examples.len()),
        files.join(", "),
        args.synthetic_alarms,
        args.seed,
        args.epochs
    )
}

fn render_report(
    args: &TrainArgs,
    examples: &[TrainingExample],
    options: &TrainOptions,
    train_examples: usize,
    evaluation: &str,
) -> String {
    let mut md = String::from(
        "# Severity classifier: training report\n\n## Data\n\n| source | incidents | P1 | P2 | P3 | P4 | P5 |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut sources: Vec<&str> = examples.iter().map(|e| e.source.as_str()).collect();
    sources.sort_unstable();
    sources.dedup();
    for src in sources {
        let of: Vec<_> = examples.iter().filter(|e| e.source == src).collect();
        let by: Vec<String> = Severity::ALL
            .iter()
            .map(|s| of.iter().filter(|e| e.label == *s).count().to_string())
            .collect();
        let _ = writeln!(md, "| {src} | {} | {} |", of.len(), by.join(" | "));
    }
    let inputs: Vec<String> = args
        .inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let _ = writeln!(
        md,
        "\nInputs: {}; synthetic storm tickets: {} (seed {}). Split: {}% of incidents held out by a hash of the \
         incident number; {} used for training. Optimiser: Adagrad SGD, {} epochs, step {}, L2 {}, class weights \
         (n / (k·n_c))^{}.\n",
        inputs.join(", "),
        args.synthetic_alarms,
        options.seed,
        options.holdout_percent,
        train_examples,
        options.epochs,
        options.learning_rate,
        options.l2,
        options.class_weight_power
    );
    md.push_str(
        "## Label leakage\n\nFeatures come from each incident's *first* event (what `classify` sees on arrival); the \
         label is the priority of its *last* event. The priority column, `u_priority_confirmation` and every \
         close-time field (resolution, closure, reassignment and reopen counts) are never features. ServiceNow \
         derives priority from impact × urgency, so the impact/urgency at opening are legitimate inputs that \
         largely determine the opening priority; the baseline line below shows how often the final priority \
         simply equals the opening one, which is the bar the model has to be read against.\n\n## Evaluation\n\n",
    );
    md.push_str(evaluation);
    md
}
