//! Progress bars of the storm lab's commands: `indicatif` on stderr, one bar per
//! policy or one for a plan's grid; hidden when stderr is not a terminal or the
//! command's output is machine-read (`--json`).

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A set of bars drawn together.
pub struct Bars {
    multi: MultiProgress,
    bars: Vec<ProgressBar>,
}

impl Bars {
    /// One bar per name, each counting to `len`.
    pub fn new(names: &[String], len: u64, hidden: bool) -> Bars {
        let target = if hidden {
            ProgressDrawTarget::hidden()
        } else {
            // indicatif draws nothing when stderr is not a terminal.
            ProgressDrawTarget::stderr()
        };
        let multi = MultiProgress::with_draw_target(target);
        let style =
            ProgressStyle::with_template("{prefix:>10} [{bar:30}] {percent:>3}% {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
        let bars = names
            .iter()
            .map(|name| {
                let bar = multi.add(ProgressBar::new(len));
                bar.set_style(style.clone());
                bar.set_prefix(name.clone());
                bar
            })
            .collect();
        Bars { multi, bars }
    }

    pub fn set(&self, index: usize, position: u64) {
        if let Some(bar) = self.bars.get(index) {
            bar.set_position(position);
        }
    }

    pub fn message(&self, index: usize, message: String) {
        if let Some(bar) = self.bars.get(index) {
            bar.set_message(message);
        }
    }

    pub fn finish(&self) {
        for bar in &self.bars {
            bar.finish();
        }
        let _ = self.multi.clear();
    }
}
