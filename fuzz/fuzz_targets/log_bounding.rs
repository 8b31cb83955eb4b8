//! Fuzzes log bounding: for any text and any limits the rendered log stays within the byte
//! cap, the report matches what was rendered, and reading the rendering back never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stormgate_shared::log_bounding::{BoundedLog, BoundingLimits, bound_text};

fuzz_target!(|input: &[u8]| {
    // Three bytes of limits, the rest is the log (lossy UTF-8, as the ingest path decodes it).
    let [a, b, head_percent, rest @ ..] = input else {
        return;
    };
    let limits = BoundingLimits {
        max_bytes: usize::from(u16::from_le_bytes([*a, *b])),
        head_percent: *head_percent,
    };
    let text = String::from_utf8_lossy(rest);
    let bounded = bound_text(&text, limits);
    let rendered = bounded.render();
    assert!(
        rendered.len() <= limits.max_bytes,
        "rendered {} bytes over a cap of {}",
        rendered.len(),
        limits.max_bytes
    );
    assert_eq!(rendered.len(), bounded.report.bytes_out);
    let _ = BoundedLog::parse_rendered(&rendered, bounded.report);
});
