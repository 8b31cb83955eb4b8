//! Logging: one JSON object per line on stdout (the Functions host forwards stdout to
//! Application Insights as traces, where `parse_json(message)` makes every field a
//! column), or human-readable lines with `STORMGATE_LOG_FORMAT=pretty`.
//!
//! Each line carries its span's fields, so everything logged while serving an invocation
//! has the host's `invocation_id` (see `app::invocation_span`).

use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::config::LogFormat;

/// The filter used when `RUST_LOG` is unset.
pub const DEFAULT_FILTER: &str = "info";

/// Why the log filter could not be used.
#[derive(Debug, thiserror::Error)]
#[error("RUST_LOG is not a valid log filter: {0}")]
pub struct FilterError(String);

/// A subscriber writing to `writer`; tests pass a buffer, the handler stdout.
pub fn subscriber<W>(
    format: LogFormat,
    filter: Option<&str>,
    writer: W,
) -> Result<Box<dyn Subscriber + Send + Sync>, FilterError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(filter.unwrap_or(DEFAULT_FILTER))
        .map_err(|e| FilterError(e.to_string()))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    Ok(match format {
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .with_target(true)
                .finish(),
        ),
        LogFormat::Pretty => Box::new(builder.pretty().finish()),
    })
}

/// Installs the process-wide subscriber writing to stdout.
pub fn init(format: LogFormat, filter: Option<&str>) -> Result<(), FilterError> {
    let subscriber = subscriber(format, filter, std::io::stdout)?;
    tracing::subscriber::set_global_default(subscriber).map_err(|e| FilterError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Collects everything written, for assertions.
    #[derive(Clone, Default)]
    pub struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Captured;
        fn make_writer(&'w self) -> Captured {
            self.clone()
        }
    }

    #[test]
    fn json_lines_carry_level_message_and_the_span_fields() {
        let out = Captured::default();
        let subscriber = subscriber(LogFormat::Json, None, out.clone()).unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("invocation", invocation_id = "abc-123");
            let _entered = span.enter();
            tracing::info!(batch = 3, "classified");
            tracing::debug!("filtered out at the default level");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["message"], "classified");
        assert_eq!(lines[0]["batch"], 3);
        assert_eq!(lines[0]["span"]["invocation_id"], "abc-123");
        assert!(lines[0]["timestamp"].is_string());
    }

    #[test]
    fn a_bad_filter_is_reported() {
        assert!(subscriber(LogFormat::Pretty, Some("info,[unclosed"), std::io::sink).is_err());
    }
}
